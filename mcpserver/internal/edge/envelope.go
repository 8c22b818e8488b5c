package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/mark3labs/mcp-go/mcp"
)

// Envelope is a message's routing members, decoded once where the
// message enters (the stdio read loop, the HTTP POST handler); mcp-go
// decodes the message fully afterwards. Params holds only what the edge
// routes on: a tool call's name, whether it carries a requestState, and
// the protocol version a 2026-07-28 request declares.
type Envelope struct {
	ID     json.RawMessage          `json:"id"`
	Method string                   `json:"method"`
	Result json.RawMessage          `json:"result"`
	Error  *mcp.JSONRPCErrorDetails `json:"error"`
	Params struct {
		Name         string `json:"name"`
		RequestState string `json:"requestState"`
		Meta         struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	} `json:"params"`
}

// ParseEnvelope decodes a message's envelope. Params of another shape are
// mcp-go's to refuse, not a parse error.
func ParseEnvelope(b []byte) (Envelope, error) {
	var env Envelope
	err := json.Unmarshal(b, &env)
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && (te.Field == "params" || strings.HasPrefix(te.Field, "params.")) {
		err = nil
	}
	return env, err
}

// HasID reports whether the message carries a non-null id.
func (e *Envelope) HasID() bool { return len(e.ID) > 0 && string(e.ID) != "null" }

// Modern reports whether the message declares the sessionless protocol in
// its _meta, as 2026-07-28 requests do.
func (e *Envelope) Modern() bool { return mcp.IsModernProtocol(e.Params.Meta.Version) }

// IDFromPrefix finds a request's id in the start of a message too large
// to read whole, so that its refusal answers the request instead of
// leaving the client waiting (an answer with id null resolves nothing).
// It tokenizes the top-level members up to "id" and skips the others'
// values; an id that is not within prefix, or is no string or integer, is
// nil (the refusal then says null, as JSON-RPC asks when the id cannot be
// read).
func IDFromPrefix(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key == "id" {
			var id json.RawMessage
			if dec.Decode(&id) != nil {
				return nil
			}
			if valid, _ := mcpgofix.IDKind(id); !valid {
				return nil
			}
			return id
		}
		if !skipValue(dec) {
			return nil
		}
	}
	return nil
}

// skipValue reads past the next value of dec, token by token, so that a
// large value is never held whole. It reports whether the value ended
// within the input.
func skipValue(dec *json.Decoder) bool {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return true
		}
	}
}
