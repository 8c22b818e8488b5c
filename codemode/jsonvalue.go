package codemode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/registry"
)

// resultJSON encodes a nested call's structured result for the Python
// child. A value JSON cannot carry (a NaN, a channel, a cycle) is an
// error, as Bub's host makes it when to_jsonable_python fails: the code
// gets "tool result is not JSON serializable: ..." raised at its await,
// and can catch it.
func resultJSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("tool result is not JSON serializable: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return b, nil
}

// nestedError is the error a failed nested call raises in the code:
// "[kind] message", Bub's str(BubError), and on the next line its details
// as JSON, as a direct call's MCP result shows them. Without them the
// code would read "Tool 'x' argument validation failed." or "Tool 'x'
// execution failed." with nothing to say which argument was wrong or why
// the handler failed.
func nestedError(e *registry.Error) error {
	if len(e.Details) == 0 {
		return e
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the model reads it: keep <, > and & as written
	if err := enc.Encode(e.Details); err != nil {
		return e
	}
	return fmt.Errorf("%w\n%s", e, bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
