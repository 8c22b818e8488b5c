package agent

import (
	"bytes"
	"encoding/json"
)

func mustJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage("{}")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
