package codemode

import (
	"encoding/json"
	"fmt"

	"github.com/bubbuild/bub-mcp/registry"
)

// resultJSON encodes a nested call's structured result for the Python
// child. A value JSON cannot carry (a NaN, a channel, a cycle) falls back
// to its text form, as Bub's host does with to_jsonable_python's str
// fallback: the tool's renderer when it has one that works, else Go's %v.
func resultJSON(t *registry.Tool, v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err == nil {
		return b, nil
	}
	text := ""
	if t != nil && t.Renderer != nil {
		if s, rerr := registry.Render(t, v); rerr == nil {
			text = s
		}
	}
	if text == "" {
		text = fmt.Sprintf("%v", v)
	}
	return json.Marshal(text)
}
