package registry

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
)

// ReflectSchema returns the JSON Schema of a Go type as MCP wants it: no
// $schema, $id, $ref or $defs, structs inlined. Recursive types cannot be
// inlined and are rejected with an error (the reflector itself would recurse
// until the stack overflows).
func ReflectSchema(t reflect.Type) (json.RawMessage, error) {
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
