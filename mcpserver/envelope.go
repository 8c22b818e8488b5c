package mcpserver

import (
	"encoding/json"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
)

// envelope is what the stdio read loop needs of a message to route it.
type envelope struct {
	ID     json.RawMessage          `json:"id"`
	Method string                   `json:"method"`
	Result json.RawMessage          `json:"result"`
	Error  *mcp.JSONRPCErrorDetails `json:"error"`
}

// modernMessage reports whether msg declares the sessionless protocol in
// its _meta, as 2026-07-28 requests do. It decodes the message again, so
// it is asked only before initialize.
func modernMessage(msg []byte) bool {
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return false
	}
	var v string
	_ = json.Unmarshal(m.Params.Meta[mcp.MetaKeyProtocolVersion], &v)
	return mcp.IsModernProtocol(v)
}

// idKind classifies a request id: JSON-RPC as MCP uses it allows strings
// and integers only.
func idKind(raw json.RawMessage) (valid, big bool) {
	if len(raw) == 0 {
		return false, false
	}
	if raw[0] == '"' {
		var s string
		return json.Unmarshal(raw, &s) == nil, false
	}
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return false, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false, false
		}
	}
	// mcp-go decodes numeric ids through float64, which is exact only up
	// to 2^53; larger ones are carried as strings and restored (see
	// withBigID).
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return true, err != nil || n > 1<<53 || n < -(1<<53)
}

// withID returns msg with its "id" member replaced by id.
func withID(msg []byte, id json.RawMessage) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, err
	}
	m["id"] = id
	return json.Marshal(m)
}

// parseEnvelope reads a message's routing members; HandleMessage decodes
// the message fully afterwards.
func parseEnvelope(b []byte) (envelope, error) {
	var env envelope
	err := json.Unmarshal(b, &env)
	return env, err
}
