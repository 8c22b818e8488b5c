package mcpgofix

// Defect: mcp-go v1.2.1 answers a JSON-RPC batch (a JSON array) with
// -32700 "Parse error" and id null, as if the message were not JSON. MCP
// removed batching in 2025-06-18; the right answer is -32600 saying so.
// Upstream: no upstream issue as of 2026-12; reported behaviour:
// HandleMessage([{"jsonrpc":"2.0","id":1,"method":"ping"}]) answers
// {"error":{"code":-32700,"message":"Parse error"},"id":null}.
// Test: TestStdioBounds, TestHTTPRequestIDs (the batch rows).
// Delete when: mcp-go answers a batch with -32600.

import (
	"bytes"
	"errors"
)

// ErrBatch refuses a JSON-RPC batch.
var ErrBatch = errors.New("JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send one message at a time")

// IsBatch reports whether msg is a JSON array: the edge answers it with
// -32600 and ErrBatch's text instead of handing it to mcp-go.
func IsBatch(msg []byte) bool {
	b := bytes.TrimLeft(msg, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}
