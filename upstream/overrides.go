package upstream

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/bubbuild/bub-mcp/internal/ident"
	"github.com/bubbuild/bub-mcp/registry"
)

// Override is [upstreams.<name>.overrides.<tool>]: local corrections to
// one upstream tool's definition, keyed by the tool's name as the
// upstream lists it. Pins (pin.go) hash the upstream's own definition,
// never the overridden one, so an override neither hides nor causes a
// change of the server's tools. Unset fields keep the upstream's values.
type Override struct {
	// Name renames the tool: it is listed and called as
	// "<server>.<name>" ("<server>_<name>" for models).
	Name string `toml:"name"`
	// Title and Description replace the upstream's.
	Title       string `toml:"title"`
	Description string `toml:"description"`
	// ReadOnly, Destructive, Idempotent and OpenWorld set the MCP hints
	// (readOnlyHint, destructiveHint, idempotentHint, openWorldHint),
	// which a profile's confirm and code_mode_tools may name
	// ("hint:destructive").
	ReadOnly    *bool `toml:"read_only"`
	Destructive *bool `toml:"destructive"`
	Idempotent  *bool `toml:"idempotent"`
	OpenWorld   *bool `toml:"open_world"`
	// Fixed are arguments with set values: they leave the input schema
	// (properties and required), the value is sent with every call, and a
	// call that passes one itself is refused.
	Fixed map[string]any `toml:"fixed"`

	fixedJSON map[string]json.RawMessage // Fixed, encoded once by check
}

// check validates one override (fail names keys under the server's
// table).
func (o *Override) check(server, tool string, fail failFunc) error {
	at := func(key ...string) []string { return append([]string{"overrides", tool}, key...) }
	if o == nil {
		return fail("empty override", at()...)
	}
	if o.Name != "" {
		if !ident.Word(o.Name) { // the model-name alphabet
			return fail(fmt.Sprintf("%q is not a tool name (want ^[a-zA-Z0-9_-]{1,64}$)", o.Name), at("name")...)
		}
		if len(server)+1+len(o.Name) > maxModelName {
			return fail(fmt.Sprintf("%s_%s is longer than %d characters, the limit of model APIs", server, o.Name, maxModelName), at("name")...)
		}
	}
	o.fixedJSON = map[string]json.RawMessage{}
	for k, v := range o.Fixed {
		if strings.TrimSpace(k) == "" {
			return fail("empty argument name", at("fixed")...)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return fail(fmt.Sprintf("not a JSON value: %v", err), at("fixed", k)...)
		}
		o.fixedJSON[k] = raw
	}
	return nil
}

// apply returns d as overridden. The input schema is rewritten only when
// arguments are fixed; otherwise the upstream's bytes go on unchanged.
func (o *Override) apply(d definition) (definition, error) {
	if o == nil {
		return d, nil
	}
	if o.Title != "" {
		d.tool.Title, d.tool.Annotations.Title = o.Title, o.Title
	}
	if o.Description != "" {
		d.tool.Description = o.Description
	}
	set := func(dst **bool, v *bool) {
		if v != nil {
			b := *v
			*dst = &b
		}
	}
	a := &d.tool.Annotations
	set(&a.ReadOnlyHint, o.ReadOnly)
	set(&a.DestructiveHint, o.Destructive)
	set(&a.IdempotentHint, o.Idempotent)
	set(&a.OpenWorldHint, o.OpenWorld)
	if len(o.fixedJSON) > 0 {
		in, err := hideArgs(d.input, o.fixedJSON)
		if err != nil {
			return d, err
		}
		d.input = in
	}
	return d, nil
}

// hideArgs removes the named arguments from an input schema's
// properties and required list.
func hideArgs(schema json.RawMessage, names map[string]json.RawMessage) (json.RawMessage, error) {
	var s map[string]json.RawMessage
	if err := json.Unmarshal(schema, &s); err != nil || s == nil {
		return nil, fmt.Errorf("fixed arguments need an object input schema: %v", err)
	}
	if raw, ok := s["properties"]; ok {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(raw, &props); err != nil {
			return nil, fmt.Errorf("input schema properties: %w", err)
		}
		for k := range names {
			delete(props, k)
		}
		b, err := json.Marshal(props)
		if err != nil {
			return nil, err
		}
		s["properties"] = b
	}
	if raw, ok := s["required"]; ok {
		var req []string
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("input schema required: %w", err)
		}
		kept := req[:0]
		for _, r := range req {
			if _, fixed := names[r]; !fixed {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(s, "required")
		} else {
			b, err := json.Marshal(kept)
			if err != nil {
				return nil, err
			}
			s["required"] = b
		}
	}
	return json.Marshal(s)
}

// withFixed adds the override's fixed arguments to a call's; a call that
// gives one of them itself is refused, since the operator fixed it.
func (o *Override) withFixed(args json.RawMessage) (json.RawMessage, error) {
	if o == nil || len(o.fixedJSON) == 0 {
		return args, nil
	}
	m := map[string]json.RawMessage{}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &m); err != nil {
			return nil, registry.NewError(registry.KindInvalidInput, "arguments must be a JSON object: "+err.Error(), nil)
		}
	}
	var given []string
	for k, v := range o.fixedJSON {
		if _, ok := m[k]; ok {
			given = append(given, k)
		}
		m[k] = v
	}
	if len(given) > 0 {
		sort.Strings(given)
		return nil, registry.NewError(registry.KindInvalidInput,
			fmt.Sprintf("argument(s) '%s' are fixed by the server's configuration and may not be given", strings.Join(given, "', '")), nil)
	}
	return json.Marshal(m)
}
