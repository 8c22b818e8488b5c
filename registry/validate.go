package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// validator checks arguments against a tool's input schema. It is compiled
// once per tool; validating is then allocation-light.
type validator struct {
	tool     string
	schema   *jsonschema.Schema
	props    map[string][]string // top-level property → JSON types, for lax coercion
	defaults map[string]any      // top-level property → default, applied when absent
}

// checkSchemaRoot refuses an input schema that is not a JSON object with
// "type": "object", the cheap part of compileValidator's checks, done at
// registration.
func checkSchemaRoot(tool string, raw json.RawMessage) error {
	var root struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(raw, &root); err != nil {
		return fmt.Errorf("registry: tool %q: input schema is not a JSON object: %w", tool, err)
	}
	if root.Type != "object" {
		return fmt.Errorf("registry: tool %q: input schema root must have \"type\": \"object\"", tool)
	}
	return nil
}

// noLoader refuses every schema reference outside the schema itself. A
// tool's schema may come from an upstream MCP server, and the compiler's
// default loader reads file: URLs: a "$ref" to file:///dev/stdin would
// read the stdio transport's input, one to a FIFO would block the call,
// and one to a JSON file would put its content in validation errors.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("only references within the schema are allowed")
}

// warmOnce makes WarmValidation's work happen once per process.
var warmOnce sync.Once

// WarmValidation prepares what compiling an argument validator needs: the
// JSON Schema library's metaschemas, ~3 ms and 1.7 MB of allocations
// (third_party/santhosh-tekuri/jsonschema/PATCHES.md). Validators are
// compiled on each tool's first call, and the first of those does this
// work if nothing did before; a server calls WarmValidation once it has
// started so that its first tools/call does not wait, and its start-up
// does not either. It is safe to call concurrently and more than once.
func WarmValidation() {
	warmOnce.Do(func() { _, _ = compileValidator("warm-up", json.RawMessage(`{"type":"object"}`)) })
}

func compileValidator(tool string, raw json.RawMessage) (*validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("registry: tool %q: input schema is not JSON: %w", tool, err)
	}
	root, ok := doc.(map[string]any)
	if !ok || root["type"] != "object" {
		return nil, fmt.Errorf("registry: tool %q: input schema root must have \"type\": \"object\"", tool)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	url := "mem:///tools/" + tool + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("registry: tool %q: %w", tool, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("registry: tool %q: input schema: %w", tool, err)
	}
	v := &validator{tool: tool, schema: s}
	props, _ := root["properties"].(map[string]any)
	for name, p := range props {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		if types := schemaTypes(pm); len(types) > 0 {
			if v.props == nil {
				v.props = map[string][]string{}
			}
			v.props[name] = types
		}
		if d, ok := pm["default"]; ok {
			if v.defaults == nil {
				v.defaults = map[string]any{}
			}
			v.defaults[name] = normalizeNumbers(d)
		}
	}
	return v, nil
}

// schemaTypes lists the JSON types a property schema allows, looking through
// "type" arrays and anyOf/oneOf branches.
func schemaTypes(p map[string]any) []string {
	var out []string
	switch t := p["type"].(type) {
	case string:
		out = append(out, t)
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		branches, _ := p[k].([]any)
		for _, b := range branches {
			if bm, ok := b.(map[string]any); ok {
				out = append(out, schemaTypes(bm)...)
			}
		}
	}
	return out
}

// normalizeNumbers turns the json.Number values jsonschema.UnmarshalJSON
// produces into float64, the form encoding/json gives handlers' maps.
func normalizeNumbers(v any) any {
	return mapNumbers(v, func(n json.Number) any {
		f, _ := n.Float64()
		return f
	})
}

// mapNumbers replaces, in place, each json.Number in v (a document
// decoded with UseNumber) with f's answer for it, and returns v so
// changed.
func mapNumbers(v any, f func(json.Number) any) any {
	switch x := v.(type) {
	case json.Number:
		return f(x)
	case map[string]any:
		for k, e := range x {
			x[k] = mapNumbers(e, f)
		}
	case []any:
		for i, e := range x {
			x[i] = mapNumbers(e, f)
		}
	}
	return v
}

// check validates raw arguments and returns the arguments the handler
// should get (errors name the tool as name): defaults filled in and, with
// lax set, strings coerced to the declared scalar types ("5"→5,
// "true"→true). The raw bytes are returned
// unchanged when nothing had to be added, which is the common case.
// decoded, when not nil, is raw already decoded (see Call.Decoded); it is
// copied before anything is added.
func (v *validator) check(raw json.RawMessage, decoded map[string]any, lax bool, name string) (json.RawMessage, *Error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	obj := decoded
	if obj == nil {
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, v.fail(name, []any{map[string]any{"loc": "", "msg": "arguments are not valid JSON: " + err.Error()}}, err)
		}
		var ok bool
		if obj, ok = doc.(map[string]any); !ok {
			return nil, v.fail(name, []any{map[string]any{"loc": "", "msg": "arguments must be a JSON object"}}, nil)
		}
	} else if (lax && v.coercible(obj)) || v.missingDefaults(obj) {
		obj = maps.Clone(obj)
	}
	changed := false
	if lax {
		for k, val := range obj {
			if s, ok := val.(string); ok {
				if c, ok := coerce(s, v.props[k]); ok {
					obj[k] = c
					changed = true
				}
			}
		}
	}
	for k, d := range v.defaults {
		if _, ok := obj[k]; !ok {
			obj[k] = d
			changed = true
		}
	}
	if err := v.schema.Validate(obj); err != nil {
		return nil, v.fail(name, validationDetails(err), err)
	}
	if !changed {
		return raw, nil
	}
	b, err := marshalNoEscape(obj)
	if err != nil {
		return nil, v.fail(name, []any{map[string]any{"loc": "", "msg": err.Error()}}, err)
	}
	return b, nil
}

// fail is the validation error of a call; name is the tool's name as the
// caller knows it.
func (v *validator) fail(name string, errs []any, cause error) *Error {
	return invalidInput(name, errs, cause)
}

// coercible reports whether lax coercion would change a value of obj.
func (v *validator) coercible(obj map[string]any) bool {
	for k, val := range obj {
		if s, ok := val.(string); ok {
			if _, ok := coerce(s, v.props[k]); ok {
				return true
			}
		}
	}
	return false
}

// missingDefaults reports whether check would add a default to obj.
func (v *validator) missingDefaults(obj map[string]any) bool {
	for k := range v.defaults {
		if _, ok := obj[k]; !ok {
			return true
		}
	}
	return false
}

// invalidInput is the error of arguments that do not fit a tool's schema;
// errs are {loc, msg} pairs.
func invalidInput(tool string, errs []any, cause error) *Error {
	return &Error{Kind: KindInvalidInput, Message: "Tool '" + tool + "' argument validation failed.",
		Details: map[string]any{"errors": errs}, Cause: cause}
}

// validationDetails flattens the validator's output into [{loc, msg}]
// pairs, the shape models handle best when correcting a call: one pair per
// bad value (an optional integer given a string is "got string, want
// integer or null", not three errors about oneOf and its branches), and a
// missing property located at the property itself.
func validationDetails(err error) []any {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []any{map[string]any{"loc": "", "msg": err.Error()}}
	}
	type group struct {
		loc     string
		got     string
		want    []string
		msgs    []string
		choices []string // oneOf/anyOf messages, used when nothing else is said
	}
	var groups []*group
	byLoc := map[string]*group{}
	at := func(loc string) *group {
		g := byLoc[loc]
		if g == nil {
			g = &group{loc: loc}
			byLoc[loc] = g
			groups = append(groups, g)
		}
		return g
	}
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			switch k := u.Error.Kind.(type) {
			case *kind.Required:
				for _, m := range k.Missing {
					at(u.InstanceLocation + "/" + pointerEscape(m)).msgs = []string{"missing property '" + m + "'"}
				}
			case *kind.Type:
				g := at(u.InstanceLocation)
				g.got = k.Got
				for _, w := range k.Want {
					if !slices.Contains(g.want, w) {
						g.want = append(g.want, w)
					}
				}
			case *kind.OneOf, *kind.AnyOf:
				g := at(u.InstanceLocation)
				g.choices = append(g.choices, u.Error.String())
			default:
				g := at(u.InstanceLocation)
				if msg := u.Error.String(); !slices.Contains(g.msgs, msg) {
					g.msgs = append(g.msgs, msg)
				}
			}
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(ve.BasicOutput())
	// The validator visits properties in map order: sort for stable text.
	slices.SortStableFunc(groups, func(a, b *group) int { return strings.Compare(a.loc, b.loc) })
	out := []any{}
	for _, g := range groups {
		msgs := g.msgs
		if len(g.want) > 0 {
			msgs = append([]string{"got " + g.got + ", want " + orList(g.want)}, msgs...)
		}
		if len(msgs) == 0 {
			msgs = g.choices
		}
		if len(msgs) > 0 {
			out = append(out, map[string]any{"loc": g.loc, "msg": strings.Join(msgs, "; ")})
		}
	}
	if len(out) == 0 {
		out = append(out, map[string]any{"loc": "", "msg": strings.TrimSpace(ve.Error())})
	}
	return out
}

// pointerEscape escapes a JSON Pointer token (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// orList joins words as "a", "a or b", "a, b or c".
func orList(w []string) string {
	if len(w) == 1 {
		return w[0]
	}
	return strings.Join(w[:len(w)-1], ", ") + " or " + w[len(w)-1]
}

// coerce converts a human-typed string to the first declared type it fits.
// Strings stay strings when the schema allows them.
func coerce(s string, types []string) (any, bool) {
	for _, t := range types {
		if t == "string" {
			return nil, false
		}
	}
	for _, t := range types {
		switch t {
		case "integer":
			if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
				return float64(n), true
			}
		case "number":
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return f, true
			}
		case "boolean":
			switch strings.ToLower(strings.TrimSpace(s)) {
			case "true", "1", "yes", "on":
				return true, true
			case "false", "0", "no", "off":
				return false, true
			}
		case "null":
			if strings.EqualFold(strings.TrimSpace(s), "null") || strings.EqualFold(strings.TrimSpace(s), "none") {
				return nil, true
			}
		case "array", "object":
			var x any
			if err := json.Unmarshal([]byte(s), &x); err == nil {
				return x, true
			}
		}
	}
	return nil, false
}
