// Package codemode exposes tools to model-written Python: it renders the
// Python stub that declares every code tool as an async function, stores it
// under $BUB_HOME, and builds the system-prompt fragment that points to it.
//
// A host wires it in with [Provider], which splits each View into direct
// tools plus run_code and the code tools, and [LocalRunner], which gives
// every session environment a Python runner (package runner). The run_code
// tool and the code_mode command register themselves in init and run
// inside a host.Host.
package codemode

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// StubTool is one tool as the stub declares it.
type StubTool struct {
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

const (
	// maxParseDepth bounds the nesting of a schema document.
	maxParseDepth = 256
	// maxTypeDepth bounds the nesting of one type expression; deeper parts
	// become Any, which keeps the stub well within Python's parser limits.
	maxTypeDepth = 32
	// maxLiteralDepth bounds the nesting of a default value; deeper ones
	// are shown as "...".
	maxLiteralDepth = 16
	// maxIntDigits keeps integer literals below Python's 4300-digit limit.
	maxIntDigits = 4000
)

// GenerateStub renders the Python stub declaring tools, sorted by name. The
// output depends only on the tools, never on their order or on earlier calls.
// It fails on a schema that is not valid JSON and on two tools that map to
// the same Python identifier.
func GenerateStub(tools []StubTool) (string, error) {
	sorted := slices.Clone(tools)
	slices.SortStableFunc(sorted, func(a, b StubTool) int { return strings.Compare(a.Name, b.Name) })

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
				return "", fmt.Errorf("codemode: duplicate tool %q", t.Name)
			}
			return "", fmt.Errorf("codemode: tools %q and %q both map to %s", prev, t.Name, ident)
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
// included) gets a "_" prefix.
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

// StubPath returns where WriteStub stores content for a session:
// <home>/codemode/<sha256(workspace NUL session)[:16]>/tools-<sha256(content)[:12]>.pyi.
// The path changes only when the session or the stub content changes.
func StubPath(home, workspace, session, content string) string {
	sessionSum := sha256.Sum256([]byte(workspace + "\x00" + session))
	contentSum := sha256.Sum256([]byte(content))
	return filepath.Join(home, "codemode",
		hex.EncodeToString(sessionSum[:])[:16],
		"tools-"+hex.EncodeToString(contentSum[:])[:12]+".pyi")
}

// WriteStub stores content at StubPath(home, workspace, session, content) and
// returns that path. An existing file is left alone: the name is derived from
// the content. Otherwise the file (mode 0600, in a directory created 0700) is
// written to a temporary name and renamed into place, so readers never see a
// partial stub.
func WriteStub(home, workspace, session, content string) (string, error) {
	path := StubPath(home, workspace, session, content)
	if _, err := os.Lstat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("codemode: write stub: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("codemode: write stub: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tools-*.tmp")
	if err != nil {
		return "", fmt.Errorf("codemode: write stub: %w", err)
	}
	tmp := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(content)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("codemode: write stub: %w", err)
	}
	return path, nil
}

// ---------------------------------------------------------------------------
// Ordered JSON

type nodeKind uint8

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is a decoded JSON value that keeps the key order of objects, which
// encoding/json's maps would lose.
type node struct {
	kind  nodeKind
	str   string // a string, or the literal text of a number
	b     bool
	items []*node // array elements
	keys  []string
	vals  []*node        // parallel to keys
	index map[string]int // key → position, for larger objects
}

// get returns the value of key in an object, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	if n.index != nil {
		if i, ok := n.index[key]; ok {
			return n.vals[i]
		}
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// set adds key; a repeated key keeps its first position and its last value,
// as Python's json module does.
func (n *node) set(key string, val *node) {
	if n.index != nil {
		if i, ok := n.index[key]; ok {
			n.vals[i] = val
			return
		}
	} else {
		for i, k := range n.keys {
			if k == key {
				n.vals[i] = val
				return
			}
		}
	}
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, val)
	if n.index == nil && len(n.keys) > 16 {
		n.index = make(map[string]int, 2*len(n.keys))
		for i, k := range n.keys {
			n.index[k] = i
		}
	} else if n.index != nil {
		n.index[key] = len(n.keys) - 1
	}
}

func (n *node) isObject() bool { return n != nil && n.kind == kindObject }
func (n *node) isArray() bool  { return n != nil && n.kind == kindArray }

// text returns a string value, or "".
func (n *node) text() string {
	if n == nil || n.kind != kindString {
		return ""
	}
	return n.str
}

// parseSchema decodes raw, keeping key order. Empty input yields nil.
func parseSchema(raw json.RawMessage) (*node, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("unexpected %v after the schema", tok)
		}
		return nil, err
	}
	return n, nil
}

func parseValue(dec *json.Decoder, depth int) (*node, error) {
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case bool:
		return &node{kind: kindBool, b: v}, nil
	case json.Number:
		return &node{kind: kindNumber, str: string(v)}, nil
	case string:
		return &node{kind: kindString, str: v}, nil
	case json.Delim:
		if depth >= maxParseDepth {
			return nil, errors.New("schema is nested too deeply")
		}
		n := &node{kind: kindArray}
		if v == '{' {
			n.kind = kindObject
		}
		for dec.More() {
			var key string
			if n.kind == kindObject {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("unexpected %v in object", kt)
				}
				key = k
			}
			val, err := parseValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if n.kind == kindObject {
				n.set(key, val)
			} else {
				n.items = append(n.items, val)
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// ---------------------------------------------------------------------------
// Python types

// member is one alternative of a union: a type expression, or (text empty)
// the Python literal of a Literal value.
type member struct {
	text string
	lit  string
}

// pyType is a union of members; it always has at least one.
type pyType []member

var anyType = pyType{{text: "Any"}}

func simple(text string) pyType { return pyType{{text: text}} }

// union joins alternatives in order, dropping duplicates; Any absorbs all.
func union(ts ...pyType) pyType {
	var out pyType
	seen := map[member]bool{}
	for _, t := range ts {
		for _, m := range t {
			if m.text == "Any" {
				return anyType
			}
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	if len(out) == 0 {
		return anyType
	}
	return out
}

// String renders the union; Literal values are gathered into one Literal at
// the place of the first.
func (t pyType) String() string {
	var parts, lits []string
	litAt := -1
	for _, m := range t {
		if m.text != "" {
			parts = append(parts, m.text)
			continue
		}
		if litAt < 0 {
			litAt = len(parts)
			parts = append(parts, "")
		}
		lits = append(lits, m.lit)
	}
	if litAt >= 0 {
		parts[litAt] = "Literal[" + strings.Join(lits, ", ") + "]"
	}
	return strings.Join(parts, " | ")
}

var scalarTypes = map[string]string{
	"string":  "str",
	"integer": "int",
	"number":  "float",
	"boolean": "bool",
	"null":    "None",
}

// builder turns schemas into type expressions and collects the TypedDicts
// they need. Inside type text a TypedDict is written as a token (NUL, its
// index, NUL) and replaced by its final name on output, so a class that turns
// out to duplicate an earlier one can be merged after being referenced.
type builder struct {
	classes []*class
	order   []int // emitted classes, dependencies first
	names   map[string]bool
	refs    map[*node]*refState
	depth   int
}

type class struct {
	name   string
	base   string // name before any numeric suffix
	doc    string // description of the object
	fields []classField
	alias  int    // the class this one was merged into, or -1
	shape  string // comparison key, set once complete
}

type classField struct {
	key, typ, doc string
}

// refState tracks one $ref target: while it is being converted, a class it
// produced (slot) is referenced by name; afterwards result is reused.
type refState struct {
	done   bool
	slot   int
	result pyType
}

func classToken(i int) string { return "\x00" + strconv.Itoa(i) + "\x00" }

func (b *builder) canon(i int) int {
	for b.classes[i].alias >= 0 {
		i = b.classes[i].alias
	}
	return i
}

// resolve replaces class tokens in s with f(index).
func resolve(s string, f func(int) string) string {
	if !strings.Contains(s, "\x00") {
		return s
	}
	var sb strings.Builder
	for {
		start := strings.IndexByte(s, 0)
		if start < 0 {
			break
		}
		end := strings.IndexByte(s[start+1:], 0)
		if end < 0 {
			break
		}
		i, err := strconv.Atoi(s[start+1 : start+1+end])
		if err != nil {
			break
		}
		sb.WriteString(s[:start])
		sb.WriteString(f(i))
		s = s[start+end+2:]
	}
	sb.WriteString(s)
	return sb.String()
}

func (b *builder) resolveNames(s string) string {
	return resolve(s, func(i int) string { return b.classes[b.canon(i)].name })
}

// typeOf converts schema s (found in the document root) to a Python type.
// hint names a TypedDict the schema may need; rs is the $ref being resolved
// when s is that ref's target.
func (b *builder) typeOf(s, root *node, hint string, rs *refState) pyType {
	if !s.isObject() || len(s.keys) == 0 || b.depth >= maxTypeDepth {
		return anyType
	}
	b.depth++
	defer func() { b.depth-- }()
	t := b.typeOfSchema(s, root, hint, rs)
	if n := s.get("nullable"); n != nil && n.kind == kindBool && n.b {
		t = union(t, simple("None"))
	}
	return t
}

func (b *builder) typeOfSchema(s, root *node, hint string, rs *refState) pyType {
	if ref := s.get("$ref"); ref != nil && ref.kind == kindString {
		return b.ref(ref.str, root)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if opts := s.get(key); opts.isArray() && len(opts.items) > 0 {
			ts := make([]pyType, len(opts.items))
			for i, opt := range opts.items {
				ts[i] = b.typeOf(opt, root, hint, nil)
			}
			return union(ts...)
		}
	}
	if all := s.get("allOf"); all.isArray() && len(all.items) == 1 {
		return b.typeOf(all.items[0], root, hint, rs)
	}
	if c := s.get("const"); c != nil {
		return literalType([]*node{c})
	}
	if e := s.get("enum"); e.isArray() && len(e.items) > 0 {
		return literalType(e.items)
	}
	switch typ := s.get("type"); {
	case typ != nil && typ.kind == kindString:
		return b.typeOfKind(s, typ.str, root, hint, rs)
	case typ.isArray() && len(typ.items) > 0:
		var ts []pyType
		seen := map[string]bool{}
		for _, item := range typ.items {
			if item.kind != kindString {
				return anyType
			}
			if !seen[item.str] {
				seen[item.str] = true
				ts = append(ts, b.typeOfKind(s, item.str, root, hint, rs))
			}
		}
		return union(ts...)
	case typ == nil && s.get("properties").isObject():
		return b.typeOfKind(s, "object", root, hint, rs)
	case typ == nil && (s.get("items") != nil || s.get("prefixItems") != nil):
		return b.typeOfKind(s, "array", root, hint, rs)
	}
	return anyType
}

// typeOfKind converts s as a schema of the single JSON type kind.
func (b *builder) typeOfKind(s *node, kind string, root *node, hint string, rs *refState) pyType {
	switch kind {
	case "array":
		prefix := s.get("prefixItems")
		if !prefix.isArray() && s.get("items").isArray() { // draft 4 tuples
			prefix = s.get("items")
		}
		if prefix.isArray() {
			if len(prefix.items) == 0 {
				return simple("tuple[()]")
			}
			parts := make([]string, len(prefix.items))
			for i, item := range prefix.items {
				parts[i] = b.typeOf(item, root, hint+"Item", nil).String()
			}
			return simple("tuple[" + strings.Join(parts, ", ") + "]")
		}
		return simple("list[" + b.typeOf(s.get("items"), root, hint+"Item", nil).String() + "]")
	case "object":
		if props := s.get("properties"); props.isObject() && len(props.keys) > 0 {
			return b.typedDict(s, props, root, hint, rs)
		}
		if extra := s.get("additionalProperties"); extra.isObject() && len(extra.keys) > 0 {
			return simple("dict[str, " + b.typeOf(extra, root, hint+"Value", nil).String() + "]")
		}
		return simple("dict[str, Any]")
	}
	if py, ok := scalarTypes[kind]; ok {
		return simple(py)
	}
	return anyType
}

// ref resolves a local reference ("#", "#/$defs/Name", any JSON pointer).
// A reference back into a schema still being converted names its TypedDict
// as a forward reference, or is Any when no TypedDict is involved.
func (b *builder) ref(ref string, root *node) pyType {
	target, name, ok := pointer(root, ref)
	if !ok {
		return anyType
	}
	if st := b.refs[target]; st != nil {
		switch {
		case st.done:
			return st.result
		case st.slot >= 0:
			return simple("'" + classToken(st.slot) + "'")
		}
		return anyType
	}
	st := &refState{slot: -1}
	b.refs[target] = st
	hint := pascal(name)
	if hint == "" {
		hint = "Ref"
	}
	st.result = b.typeOf(target, root, hint, st)
	st.done = true
	return st.result
}

// pointer finds the target of a local reference and the last path segment.
func pointer(root *node, ref string) (*node, string, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok || root == nil {
		return nil, "", false
	}
	if p, err := url.PathUnescape(frag); err == nil {
		frag = p
	}
	if frag == "" {
		return root, "", true
	}
	if frag[0] != '/' {
		return nil, "", false
	}
	n, name := root, ""
	for _, seg := range strings.Split(frag[1:], "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch n.kind {
		case kindObject:
			n = n.get(seg)
		case kindArray:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n.items) {
				return nil, "", false
			}
			n = n.items[i]
		default:
			n = nil
		}
		if n == nil {
			return nil, "", false
		}
		name = seg
	}
	return n, name, true
}

// typedDict declares (or reuses) the TypedDict for an object schema.
func (b *builder) typedDict(s, props, root *node, hint string, rs *refState) pyType {
	base := pascal(s.get("title").text())
	if base == "" {
		base = pascal(hint)
	}
	if base == "" {
		base = "Result"
	}
	base = Identifier(base)
	name := base
	for i := 2; b.names[name]; i++ {
		name = base + strconv.Itoa(i)
	}
	b.names[name] = true
	slot := len(b.classes)
	c := &class{name: name, base: base, doc: s.get("description").text(), alias: -1}
	b.classes = append(b.classes, c)
	if rs != nil && rs.slot < 0 {
		rs.slot = slot
	}

	required := requiredSet(s)
	for i, key := range props.keys {
		p := props.vals[i]
		typ := b.typeOf(p, root, name+pascal(key), nil).String()
		if !required[key] {
			typ = "NotRequired[" + typ + "]"
		}
		c.fields = append(c.fields, classField{key: key, typ: typ, doc: p.get("description").text()})
	}

	shape := b.shape(slot)
	for _, other := range b.order {
		if o := b.classes[other]; o.base == base && o.shape == shape {
			c.alias = other
			delete(b.names, name)
			if rs != nil && rs.slot == slot {
				rs.slot = other
			}
			return simple(classToken(other))
		}
	}
	c.shape = shape
	b.order = append(b.order, slot)
	return simple(classToken(slot))
}

// shape is what two classes must share to be merged: everything but the name.
func (b *builder) shape(i int) string {
	c := b.classes[i]
	var sb strings.Builder
	sb.WriteString(pyRepr(c.doc))
	for _, f := range c.fields {
		sb.WriteString("\x01" + pyRepr(f.key) + "\x01" + f.typ + "\x01" + pyRepr(f.doc))
	}
	return resolve(sb.String(), func(j int) string {
		if j = b.canon(j); j == i {
			return "\x00self\x00"
		}
		return classToken(j)
	})
}

func requiredSet(s *node) map[string]bool {
	req := map[string]bool{}
	if r := s.get("required"); r.isArray() {
		for _, item := range r.items {
			if item.kind == kindString {
				req[item.str] = true
			}
		}
	}
	return req
}

// literalType is Literal[...] of the values Python's Literal accepts, joined
// with the plain types of the others.
func literalType(vals []*node) pyType {
	ts := make([]pyType, len(vals))
	for i, v := range vals {
		if lit, ok := literalValue(v); ok {
			ts[i] = pyType{{lit: lit}}
			continue
		}
		switch v.kind {
		case kindNumber:
			if isIntText(v.str) {
				ts[i] = simple("int")
			} else {
				ts[i] = simple("float")
			}
		case kindArray:
			ts[i] = simple("list[Any]")
		default:
			ts[i] = simple("dict[str, Any]")
		}
	}
	return union(ts...)
}

func literalValue(v *node) (string, bool) {
	switch v.kind {
	case kindNull, kindBool, kindString:
		return pyLiteral(v, 0), true
	case kindNumber:
		if isIntText(v.str) && len(v.str) <= maxIntDigits {
			return pyNumber(v.str), true
		}
	}
	return "", false
}

func (b *builder) renderClass(i int) string {
	c := b.classes[i]
	functional := false
	for _, f := range c.fields {
		if !isParamName(f.key) {
			functional = true
		}
	}
	var sb strings.Builder
	if functional {
		for _, line := range strings.Split(strings.TrimSpace(normalizeNewlines(c.doc)), "\n") {
			if line = comment(line); line != "" {
				sb.WriteString("# " + line + "\n")
			}
		}
		sb.WriteString(c.name + " = TypedDict(" + pyRepr(c.name) + ", {\n")
		for _, f := range c.fields {
			if doc := comment(f.doc); doc != "" {
				sb.WriteString("    # " + doc + "\n")
			}
			sb.WriteString("    " + pyRepr(f.key) + ": " + f.typ + ",\n")
		}
		sb.WriteString("})")
	} else {
		sb.WriteString("class " + c.name + "(TypedDict):")
		if doc := docstring(c.doc, "    "); doc != "" {
			sb.WriteString("\n" + doc)
		}
		for _, f := range c.fields {
			if doc := comment(f.doc); doc != "" {
				sb.WriteString("\n    # " + doc)
			}
			sb.WriteString("\n    " + f.key + ": " + f.typ)
		}
	}
	return b.resolveNames(sb.String())
}

// ---------------------------------------------------------------------------
// Functions

type param struct {
	key, typ, doc string
	required      bool
	def           *node
}

func (b *builder) function(t StubTool, ident string) (string, error) {
	in, err := parseSchema(t.InputSchema)
	if err != nil {
		return "", fmt.Errorf("codemode: tool %q: input schema: %w", t.Name, err)
	}
	out, err := parseSchema(t.OutputSchema)
	if err != nil {
		return "", fmt.Errorf("codemode: tool %q: output schema: %w", t.Name, err)
	}
	prefix := pascal(ident)

	var required, optional, extra []param
	if props := in.get("properties"); props.isObject() {
		req := requiredSet(in)
		for i, key := range props.keys {
			p := props.vals[i]
			prm := param{
				key:      key,
				typ:      b.resolveNames(b.typeOf(p, in, prefix+pascal(key), nil).String()),
				doc:      p.get("description").text(),
				required: req[key],
				def:      p.get("default"),
			}
			switch {
			case !isParamName(key):
				extra = append(extra, prm)
			case prm.required:
				required = append(required, prm)
			default:
				optional = append(optional, prm)
			}
		}
	}
	named := slices.Concat(required, optional)

	returns := "Any"
	if out != nil && out.kind != kindNull {
		returns = b.resolveNames(b.typeOf(out, out, prefix+"Result", nil).String())
	}

	var sig []string
	if len(named) > 0 {
		sig = append(sig, "*")
	}
	var args []string
	for _, p := range named {
		s := p.key + ": " + p.typ
		if !p.required {
			s += " = " + defaultText(p.def)
		}
		sig = append(sig, s)
		if doc := collapse(p.doc); doc != "" {
			args = append(args, "    "+p.key+": "+doc)
		}
	}
	if len(extra) > 0 {
		kwargs := "kwargs"
		for slices.ContainsFunc(named, func(p param) bool { return p.key == kwargs }) {
			kwargs += "_"
		}
		sig = append(sig, "**"+kwargs+": Any")
		for _, p := range extra {
			detail := p.typ + ", optional"
			switch {
			case p.required:
				detail = p.typ + ", required"
			case p.def != nil:
				detail = p.typ + " = " + defaultText(p.def)
			}
			line := "    " + pyRepr(p.key) + " (" + detail + ", via **" + kwargs + ")"
			if doc := collapse(p.doc); doc != "" {
				line += ": " + doc
			}
			args = append(args, line)
		}
	}

	doc := strings.TrimSpace(t.Description)
	if len(args) > 0 {
		if doc != "" {
			doc += "\n\n"
		}
		doc += "Args:\n" + strings.Join(args, "\n")
	}
	var sb strings.Builder
	sb.WriteString("async def " + ident + "(" + strings.Join(sig, ", ") + ") -> " + returns + ":\n")
	if ds := docstring(doc, "    "); ds != "" {
		sb.WriteString(ds + "\n")
	}
	sb.WriteString("    ...")
	return sb.String(), nil
}

func defaultText(def *node) string {
	if def == nil {
		return "..."
	}
	return pyLiteral(def, 0)
}

// ---------------------------------------------------------------------------
// Names and text

var hardKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true, "def": true,
	"del": true, "elif": true, "else": true, "except": true, "finally": true, "for": true,
	"from": true, "global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true,
	"return": true, "try": true, "while": true, "with": true, "yield": true,
}

var softKeywords = map[string]bool{"_": true, "case": true, "match": true, "type": true}

func isWordByte(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// isParamName reports whether key can be written as a parameter or field
// name: an ASCII identifier that is not a hard keyword.
func isParamName(key string) bool {
	if key == "" || key[0] >= '0' && key[0] <= '9' || hardKeywords[key] {
		return false
	}
	for _, r := range key {
		if !isWordByte(r) {
			return false
		}
	}
	return true
}

// pascal joins the ASCII alphanumeric runs of s, each with its first letter
// upper-cased: "order item" → "OrderItem", "max-results" → "MaxResults".
func pascal(s string) string {
	var sb strings.Builder
	start := true
	for _, r := range s {
		if r < utf8.RuneSelf && isWordByte(r) && r != '_' {
			if start && r >= 'a' && r <= 'z' {
				r -= 'a' - 'A'
			}
			sb.WriteRune(r)
			start = false
		} else {
			start = true
		}
	}
	return sb.String()
}

func normalizeNewlines(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// comment makes s fit on one comment line: whitespace collapsed, invalid
// UTF-8 replaced, and runes that are not graphic (controls, format
// characters) written as Python escapes.
func comment(s string) string {
	var sb strings.Builder
	for _, r := range collapse(s) {
		if unicode.IsGraphic(r) {
			sb.WriteRune(r)
		} else {
			writeRuneEscape(&sb, r)
		}
	}
	return sb.String()
}

func writeRuneEscape(sb *strings.Builder, r rune) {
	switch {
	case r <= 0xff:
		fmt.Fprintf(sb, `\x%02x`, r)
	case r <= 0xffff:
		fmt.Fprintf(sb, `\u%04x`, r)
	default:
		fmt.Fprintf(sb, `\U%08x`, r)
	}
}

// docstring renders text as a docstring indented by indent, or "" for empty
// text. Backslashes, runs of three quotes and quotes that end the text are
// escaped, so any text yields valid Python.
func docstring(text, indent string) string {
	text = strings.TrimSpace(normalizeNewlines(text))
	if text == "" {
		return ""
	}
	var sb strings.Builder
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '"':
			j := i
			for j < len(text) && text[j] == '"' {
				j++
			}
			if j-i >= 3 || j == len(text) {
				sb.WriteString(strings.Repeat(`\"`, j-i))
			} else {
				sb.WriteString(text[i:j])
			}
			i = j
			continue
		case r == '\\':
			sb.WriteString(`\\`)
		case r == '\n', r == '\t', unicode.IsGraphic(r):
			sb.WriteRune(r)
		default:
			writeRuneEscape(&sb, r)
		}
		i += size
	}
	lines := strings.Split(sb.String(), "\n")
	if len(lines) == 1 {
		return indent + `"""` + lines[0] + `"""`
	}
	sb.Reset()
	sb.WriteString(indent + `"""` + lines[0] + "\n")
	for _, line := range lines[1:] {
		sb.WriteString(strings.TrimRight(indent+line, " \t") + "\n")
	}
	sb.WriteString(indent + `"""`)
	return sb.String()
}

// pyRepr quotes s as Python's repr does.
func pyRepr(s string) string {
	quote := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var sb strings.Builder
	sb.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == quote || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == ' ' || unicode.IsPrint(r):
			sb.WriteRune(r)
		default:
			writeRuneEscape(&sb, r)
		}
	}
	sb.WriteRune(quote)
	return sb.String()
}

// pyLiteral writes a JSON value as a Python expression.
func pyLiteral(n *node, depth int) string {
	if depth > maxLiteralDepth {
		return "..."
	}
	switch n.kind {
	case kindNull:
		return "None"
	case kindBool:
		if n.b {
			return "True"
		}
		return "False"
	case kindNumber:
		return pyNumber(n.str)
	case kindString:
		return pyRepr(n.str)
	case kindArray:
		parts := make([]string, len(n.items))
		for i, item := range n.items {
			parts[i] = pyLiteral(item, depth+1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	parts := make([]string, len(n.keys))
	for i, k := range n.keys {
		parts[i] = pyRepr(k) + ": " + pyLiteral(n.vals[i], depth+1)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func isIntText(s string) bool { return !strings.ContainsAny(s, ".eE") }

// pyNumber renders a JSON number as Python's json module would load and
// repr it: integers exactly, everything else as a float.
func pyNumber(s string) string {
	if isIntText(s) {
		if len(s) > maxIntDigits {
			return "..."
		}
		var z big.Int
		if _, ok := z.SetString(s, 10); ok {
			return z.String()
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return "..."
	}
	return pyFloat(f)
}

// pyFloat formats f like Python's repr: the shortest round-trip digits, in
// positional notation for exponents -4 to 15 and scientific otherwise.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "float('inf')"
	case math.IsInf(f, -1):
		return "-float('inf')"
	case math.IsNaN(f):
		return "float('nan')"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
