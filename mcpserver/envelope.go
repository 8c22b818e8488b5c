package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
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

// errBatch refuses a JSON-RPC batch: MCP removed batching in 2025-06-18,
// and mcp-go v1.2.1 answers one with a parse error, as if it were not JSON
// (no upstream issue covers it). TestStdioBounds and TestHTTPRequestIDs
// fail without it.
var errBatch = errors.New("JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send one message at a time")

// isBatch reports whether msg is a JSON array.
func isBatch(msg []byte) bool {
	b := bytes.TrimLeft(msg, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}

// nullID reports whether the message is a request or notification with
// "id": null, which MCP forbids ("the ID MUST NOT be null"; a notification
// has none) and mcp-go v1.2.1 takes for a notification: nothing would
// answer, and a client waiting for one would wait forever (no upstream
// issue covers it; TestStdioBounds and TestHTTPRequestIDs fail without).
func (e envelope) nullID() bool { return e.Method != "" && string(e.ID) == "null" }

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
	// mcp-go decodes numeric ids through float64, which tells integers
	// apart only below 2^53; the others are carried as strings and
	// restored (see serveBigID), as checkID expects.
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return true, err != nil || n >= 1<<53 || n <= -(1<<53)
}

// errOddID is checkID's refusal.
var errOddID = errors.New("invalid request id: an id must be a string or an integer")

// checkID is an mcp-go OnRequestInitialization hook: it refuses, before
// anything runs, a request whose id mcp-go would not echo exactly. mcp-go
// v1.2.1 accepts any JSON value as an id and decodes numbers through
// float64 (the decoding mark3labs/mcp-go issue #592 reports for
// arguments; no upstream issue covers ids). The stdio transport checks
// ids itself before mcp-go sees them; over HTTP the hook is what finds
// them, at no cost for the ids clients send, and tells the request's
// writer to hold back mcp-go's answer, so that serveOddID answers instead
// (refusing the id, or serving a large integer id exactly).
func checkID(ctx context.Context, id any, _ any) error {
	switch v := id.(type) {
	case string:
		return nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return nil
		}
	}
	if r := requestFrom(ctx); r != nil && r.pw != nil {
		r.pw.holdBack()
	}
	return errOddID
}

// idWriter restores a large integer id in the response to a request that
// went through mcp-go with the id as a string token (serveOddID).
type idWriter struct {
	http.ResponseWriter
	token, id []byte
}

func (w *idWriter) Write(b []byte) (int, error) {
	if _, err := w.ResponseWriter.Write(bytes.ReplaceAll(b, w.token, w.id)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *idWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *idWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withBigID returns msg with its large integer id replaced by the string
// token it travels through mcp-go as (bigIDPrefix and the digits), and
// the token, which the answer carries in its place.
func withBigID(msg []byte, id json.RawMessage) (out, token []byte, err error) {
	token, _ = json.Marshal(bigIDPrefix + string(id))
	out, err = withID(msg, token)
	return out, token, err
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

// isInitialize reports whether a POST body is an initialize request, as
// mcp-go will read it (encoding/json too). Only a body that could name
// the method is decoded: one holding the word, or a \u escape (the only
// way to spell its letters otherwise).
func isInitialize(body []byte) bool {
	if !bytes.Contains(body, []byte("initialize")) && !bytes.Contains(body, []byte(`\u`)) {
		return false
	}
	env, err := parseEnvelope(body)
	return err == nil && env.Method == string(mcp.MethodInitialize)
}

// idFromPrefix finds a request's id in the start of a message too large
// to read whole, so that its refusal answers the request instead of
// leaving the client waiting (an answer with id null resolves nothing).
// It tokenizes the top-level members up to "id" and skips the others'
// values; an id that is not within prefix, or is no string or integer, is
// nil (the refusal then says null, as JSON-RPC asks when the id cannot be
// read).
func idFromPrefix(prefix []byte) json.RawMessage {
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
			if valid, _ := idKind(id); !valid {
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
