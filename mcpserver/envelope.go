package mcpserver

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// envelope is what the stdio read loop needs of a message to route it.
type envelope struct {
	ID     json.RawMessage          `json:"id"`
	Method string                   `json:"method"`
	Result json.RawMessage          `json:"result"`
	Error  *mcp.JSONRPCErrorDetails `json:"error"`
}

// parseEnvelope reads a message's routing members; HandleMessage decodes
// the message fully afterwards.
func parseEnvelope(b []byte) (envelope, error) {
	var env envelope
	err := json.Unmarshal(b, &env)
	return env, err
}
