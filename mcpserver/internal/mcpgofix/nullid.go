package mcpgofix

// Defect: mcp-go v1.2.1 takes a request with "id": null for a
// notification and never answers it; MCP says "the ID MUST NOT be null",
// and a client waiting for the answer waits forever.
// Upstream: no upstream issue as of 2026-12; reported behaviour:
// {"jsonrpc":"2.0","id":null,"method":"ping"} gets no answer at all.
// Test: TestStdioBounds, TestHTTPRequestIDs (the null-id rows).
// Delete when: mcp-go refuses a null id with -32600.

import "encoding/json"

// NullID reports whether a message with this method and raw id is a
// request with "id": null, which the edge refuses with -32600 (ErrOddID)
// and id null.
func NullID(method string, id json.RawMessage) bool {
	return method != "" && string(id) == "null"
}
