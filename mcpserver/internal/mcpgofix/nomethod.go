package mcpgofix

// Defect: mcp-go v1.2.1 takes a message with an id but no method, result
// or error for something else: its stdio handling answers -32601 "Method
// not found" (with an empty name), and its streamable HTTP handler takes
// it for a response to a server request and answers 202 Accepted, so the
// client never hears that its message was not a request at all. JSON-RPC
// 2.0 §5.1 answers an invalid Request object with -32600.
// Upstream: no upstream issue as of 2026-12; reported behaviour:
// {"jsonrpc":"2.0","id":9} gets -32601 on stdio and 202 over HTTP.
// Test: TestNoMethod (stdio and HTTP).
// Delete when: mcp-go answers such a message with -32600 on both.

import (
	"encoding/json"
	"errors"
)

// ErrNoMethod refuses a message that carries an id and neither a method
// (a request) nor a result or an error (a response).
var ErrNoMethod = errors.New("invalid request: a message with an id needs a method (a request), or a result or an error (a response)")

// NoMethod reports whether a message with this method, raw id, result and
// error is neither a request nor a response: the edge refuses it with
// -32600 (ErrNoMethod) and its id.
func NoMethod(method string, id, result json.RawMessage, hasError bool) bool {
	return method == "" && len(id) > 0 && string(id) != "null" && result == nil && !hasError
}
