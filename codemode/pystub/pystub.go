// Package pystub compiles tool declarations (a name, a description and the
// JSON Schemas of arguments and result) into one Python stub module that
// declares every tool as a typed async function, so that a model writing
// Python can read what it may call and how.
//
// It is a pure function of its input: it reads no files, keeps no state
// between calls and depends only on the standard library. Where the stub
// is stored, and how code reaches the declared tools, is up to the caller
// (package codemode and its runner).
package pystub

// This file is the entry point; schema.go decodes schemas and resolves
// $ref pointers, types.go turns schemas into Python types and signatures,
// and literals.go writes Python literals, text and names.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Tool is one tool as the stub declares it. It carries only what the stub
// shows, so callers can feed tools from any registry.
type Tool struct {
	// Name is the model-facing name ("orders_get", "mcp_search-docs").
	// The stub declares it as Identifier(Name).
	Name string
	// Description becomes the function's docstring.
	Description string
	// InputSchema is the JSON Schema of the arguments; its properties become
	// keyword-only parameters. Nil or empty means no parameters.
	InputSchema json.RawMessage
	// OutputSchema is the JSON Schema of the structured result. Nil (or JSON
	// null) means the function returns Any.
	OutputSchema json.RawMessage
}

// stubHeader opens every stub: a module docstring for the reader and the one
// import line the declarations rely on.
const stubHeader = `"""Tools available inside ` + "`run_code`" + ` as ` + "`tools.<name>(...)`" + `.

Every tool is an async function: ` + "`await`" + ` it (top-level ` + "`await`" + ` works) and pass
keyword arguments only. A call returns the structured value described by its
return type and raises an exception when the tool fails. Run independent calls
concurrently with ` + "`asyncio.gather`" + `.
"""

from typing import Any, Literal, NotRequired, TypedDict`

// Generate renders the Python stub declaring tools, sorted by name. The
// output depends only on the tools, never on their order or on earlier calls,
// so a caller may name a stored stub after its content.
//
// It fails on a schema that is not valid JSON and on two tools that map to
// the same Python identifier. Error messages name the tool but carry no
// package prefix, so that the caller's own prefix leads.
func Generate(tools []Tool) (string, error) {
	sorted := slices.Clone(tools)
	slices.SortStableFunc(sorted, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })

	b := &builder{names: map[string]bool{}, refs: map[*node]*refState{}}
	for _, reserved := range []string{"Any", "Literal", "NotRequired", "TypedDict"} {
		b.names[reserved] = true
	}
	idents := make([]string, len(sorted))
	owner := map[string]string{}
	for i, t := range sorted {
		ident := Identifier(t.Name)
		if prev, ok := owner[ident]; ok {
			if prev == t.Name {
				return "", fmt.Errorf("duplicate tool %q", t.Name)
			}
			return "", fmt.Errorf("tools %q and %q both map to %s", prev, t.Name, ident)
		}
		owner[ident] = t.Name
		idents[i] = ident
		b.names[ident] = true
	}

	funcs := make([]string, len(sorted))
	for i, t := range sorted {
		f, err := b.function(t, idents[i])
		if err != nil {
			return "", err
		}
		funcs[i] = f
	}

	var out strings.Builder
	out.WriteString(stubHeader)
	for _, i := range b.order {
		out.WriteString("\n\n\n")
		out.WriteString(b.renderClass(i))
	}
	for _, f := range funcs {
		out.WriteString("\n\n\n")
		out.WriteString(f)
	}
	out.WriteString("\n")
	return out.String(), nil
}

// Identifier returns the Python name under which the stub declares the tool
// with model name name, and under which code calls it as tools.<name>: every
// character other than an ASCII letter, digit or underscore becomes "_", and
// a name that is empty, starts with a digit or is a keyword (soft keywords
// included) gets a "_" prefix. It is exported because whatever serves
// tools.<name> at run time must map names the same way.
//
// Python's \W would keep non-ASCII letters; this does not, because Python
// NFKC-normalizes identifiers, so some of them would not round-trip.
func Identifier(name string) string {
	var sb strings.Builder
	for _, r := range name {
		if isWordByte(r) {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	ident := sb.String()
	if ident == "" || (ident[0] >= '0' && ident[0] <= '9') || hardKeywords[ident] || softKeywords[ident] {
		ident = "_" + ident
	}
	return ident
}
