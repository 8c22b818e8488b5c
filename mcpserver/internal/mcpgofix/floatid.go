package mcpgofix

// Defect: mcp-go v1.2.1 accepts any JSON value as a request id and
// decodes numbers through float64 (mcp.RequestId's UnmarshalJSON): an
// object id is echoed as given, 1.5 is served although MCP allows only
// strings and integers, and an integer beyond 2^53 comes back rounded
// (9007199254740993 as 9007199254740992), so the client cannot match the
// answer to its request.
// Upstream: mark3labs/mcp-go issue #592 reports the same float64
// decoding for tool arguments (closed without a fix); no upstream issue
// covers request ids as of 2026-12.
// Test: TestHTTPRequestIDs, TestStdioBounds, TestWire (the big-id rows).
// Delete when: mcp.RequestId keeps integers exactly (json.Number or
// int64) and refuses ids that are neither strings nor integers.
//
// The repair: the edge classifies every id (IDKind) before mcp-go sees
// the message; an id that is no string or integer is refused with
// ErrOddID; a large integer travels through mcp-go as a string token
// (BigID) and the answer's token is replaced by the digits (RestoreID,
// the one place bub-mcp rewrites mcp-go's output bytes: nothing else can
// carry the digits through mcp-go's float64).

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// ErrOddID refuses an id that is no string or integer (or is null).
var ErrOddID = errors.New("invalid request id: an id must be a string or an integer")

// BigIDPrefix marks an id that travels through mcp-go as a string token.
const BigIDPrefix = "bub-big-id:"

// IDKind classifies a raw request id: valid when a string or an integer,
// big when an integer mcp-go would round.
func IDKind(raw json.RawMessage) (valid, big bool) {
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
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return true, err != nil || n >= 1<<53 || n <= -(1<<53)
}

// BigID returns msg with its large integer id replaced by the string
// token it travels through mcp-go as, and that token (as JSON), which
// RestoreID turns back into id in the answer.
func BigID(msg []byte, id json.RawMessage) (out, token []byte, err error) {
	token, _ = json.Marshal(BigIDPrefix + string(id))
	out, err = WithID(msg, token)
	return out, token, err
}

// WithID returns msg with its "id" member replaced by id.
func WithID(msg []byte, id json.RawMessage) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, err
	}
	m["id"] = id
	return json.Marshal(m)
}

// TokenID renders an id mcp-go hands to hooks as the client sent it: a
// BigID token goes back to its digits.
func TokenID(s string) string { return strings.TrimPrefix(s, BigIDPrefix) }

// RestoreID is an http.ResponseWriter that writes the answer to a BigID
// request with the original digits in place of the token.
type RestoreID struct {
	http.ResponseWriter
	Token, ID []byte
}

func (w *RestoreID) Write(b []byte) (int, error) {
	if _, err := w.ResponseWriter.Write(bytes.ReplaceAll(b, w.Token, w.ID)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush passes on to the connection (SSE answers).
func (w *RestoreID) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *RestoreID) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// RPCError is an error response to the request with the raw id, which is
// echoed byte for byte (a big integer id is not rounded); an empty id is
// null.
func RPCError(rawID json.RawMessage, code int, message string) mcp.JSONRPCError {
	var id any
	if len(rawID) > 0 {
		id = rawID
	}
	return mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Error: mcp.NewJSONRPCErrorDetails(code, message, nil)}
}
