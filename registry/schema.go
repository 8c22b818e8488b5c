package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"
)

// ReflectSchema returns the JSON Schema of a Go type as MCP wants it: no
// $schema, $id, $ref or $defs, structs inlined. Recursive types cannot be
// inlined and are rejected with an error (the reflector itself would recurse
// until the stack overflows). A type's schema is reflected once per
// process, or not at all when SeedSchemas supplied it.
func ReflectSchema(t reflect.Type) (json.RawMessage, error) {
	if v, ok := reflected.Load(t); ok {
		return v.(json.RawMessage), nil
	}
	if b, ok := seeds[TypeKey(t)]; ok {
		return b, nil
	}
	b, err := reflectSchema(t)
	if err != nil {
		return nil, err
	}
	v, _ := reflected.LoadOrStore(t, slices.Clip(b))
	return v.(json.RawMessage), nil
}

// A schema depends on nothing but its type (JSONSchemaExtend methods
// included), so one reflection serves every tool of that type, and a
// build can carry its own types' schemas instead of reflecting them at
// each start: reflection is most of the work before a server's first
// tools/list (~2.5 ms of ~20, most of it in the reflector's MarshalJSON).
var (
	reflected sync.Map                   // reflect.Type → json.RawMessage, clipped so appends copy
	seeds     map[string]json.RawMessage // TypeKey → schema; set by SeedSchemas during init
)

// SeedSchemas supplies schemas reflected by the same build, as
// ReflectedSchemas returns them (a JSON object from TypeKey to schema):
// ReflectSchema returns a seeded type's schema without reflecting it. Call
// it from an init function, before any tool is built. A seed must be what
// reflection gives; internal/schemaseed, which seeds bub-mcp's own tool
// types, has a test that regenerates and compares its file.
func SeedSchemas(data []byte) error {
	m, ok := seedLines(data)
	if !ok {
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("registry: schema seeds: %w", err)
		}
	}
	if seeds == nil {
		seeds = make(map[string]json.RawMessage, len(m))
	}
	for k, v := range m {
		seeds[k] = slices.Clip(v)
	}
	return nil
}

// seedLines reads the form internal/schemaseed's generator writes — "{",
// one `"key": schema,` line per seed, "}" — without decoding the schemas:
// json.Unmarshal of the whole file was ~3% of the CPU of a cold start to
// the first tools/list, in every command. Any other form reports false.
func seedLines(data []byte) (map[string]json.RawMessage, bool) {
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	if len(lines) < 2 || string(lines[0]) != "{" || string(lines[len(lines)-1]) != "}" {
		return nil, false
	}
	m := make(map[string]json.RawMessage, len(lines)-2)
	for _, l := range lines[1 : len(lines)-1] {
		end := stringEnd(l)
		if end < 0 || !bytes.HasPrefix(l[end:], []byte(": {")) {
			return nil, false
		}
		var key string
		if err := json.Unmarshal(l[:end], &key); err != nil {
			return nil, false
		}
		m[key] = slices.Clip(bytes.TrimSuffix(l[end+2:], []byte(",")))
	}
	return m, true
}

// stringEnd is the index just past the JSON string that b starts with,
// or -1.
func stringEnd(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return -1
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// ReflectedSchemas returns the schemas this process reflected (seeded
// ones are not reflected), keyed by TypeKey.
func ReflectedSchemas() map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	reflected.Range(func(k, v any) bool {
		out[TypeKey(k.(reflect.Type))] = v.(json.RawMessage)
		return true
	})
	return out
}

// TypeKey names a type uniquely within a build: a named type by its
// import path and name, any other by its structure spelled out with the
// keys of the types it is made of (reflect.Type.String would name a
// package by its last element, which two packages can share).
func TypeKey(t reflect.Type) string {
	var b strings.Builder
	writeTypeKey(&b, t)
	return b.String()
}

func writeTypeKey(b *strings.Builder, t reflect.Type) {
	if t.Name() != "" {
		if p := t.PkgPath(); p != "" {
			b.WriteString(p)
			b.WriteByte('.')
		}
		b.WriteString(t.Name())
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		b.WriteByte('*')
		writeTypeKey(b, t.Elem())
	case reflect.Slice:
		b.WriteString("[]")
		writeTypeKey(b, t.Elem())
	case reflect.Array:
		b.WriteString("[" + strconv.Itoa(t.Len()) + "]")
		writeTypeKey(b, t.Elem())
	case reflect.Map:
		b.WriteString("map[")
		writeTypeKey(b, t.Key())
		b.WriteByte(']')
		writeTypeKey(b, t.Elem())
	case reflect.Struct:
		b.WriteString("struct {")
		for i := range t.NumField() {
			f := t.Field(i)
			if i > 0 {
				b.WriteByte(';')
			}
			b.WriteByte(' ')
			if !f.Anonymous { // an embedded field is named by its type
				if f.PkgPath != "" { // unexported: its package is part of its name
					b.WriteString(f.PkgPath + ".")
				}
				b.WriteString(f.Name + " ")
			}
			writeTypeKey(b, f.Type)
			if f.Tag != "" {
				b.WriteString(" " + strconv.Quote(string(f.Tag)))
			}
		}
		b.WriteString(" }")
	default: // interfaces, funcs, channels: no schema depends on their insides
		b.WriteString(t.String())
	}
}

func reflectSchema(t reflect.Type) (json.RawMessage, error) {
	if err := checkRecursion(t, nil); err != nil {
		return nil, err
	}
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.ReflectFromType(t)
	s.Version = ""
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("registry: schema of %s: %w", t, err)
	}
	return b, nil
}

// checkRecursion walks the types a value of t can contain and fails if a
// struct type contains itself.
func checkRecursion(t reflect.Type, stack []reflect.Type) error {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return checkRecursion(t.Elem(), stack)
	case reflect.Map:
		return checkRecursion(t.Elem(), stack)
	case reflect.Struct:
		for _, s := range stack {
			if s == t {
				return fmt.Errorf("registry: recursive type %s cannot be a tool schema", t)
			}
		}
		stack = append(stack, t)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if err := checkRecursion(f.Type, stack); err != nil {
				return err
			}
		}
	case reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return fmt.Errorf("registry: type %s has no JSON form", t)
	}
	return nil
}

// HoistNullable moves the description of each nullable property of s
// (`jsonschema:"nullable"` wraps it in oneOf [T, null]) up to the
// property, where models and clients look for it. Argument types call it
// from their JSONSchemaExtend method.
func HoistNullable(s *jsonschema.Schema) {
	if s.Properties == nil {
		return
	}
	for p := s.Properties.Oldest(); p != nil; p = p.Next() {
		v := p.Value
		if len(v.OneOf) == 2 && v.OneOf[1].Type == "null" && v.Description == "" {
			v.Description, v.OneOf[0].Description = v.OneOf[0].Description, ""
		}
	}
}
