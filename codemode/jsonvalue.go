package codemode

import (
	"encoding/json"
	"fmt"
	"strings"
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
