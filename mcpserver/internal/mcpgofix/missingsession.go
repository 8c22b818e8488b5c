package mcpgofix

// Defect: mcp-go v1.2.1 answers a 2025-era POST without Mcp-Session-Id
// (other than initialize) 404 "Invalid session ID", the answer that tells
// a client its session expired and to initialize again; a client that
// never sent the header (a hand-written curl, a client that forgot it)
// learns nothing from it. The 2025-11-25 transport says such a request
// SHOULD get 400, as the TypeScript SDK answers.
// Upstream: mark3labs/mcp-go#689 (merged 2026-01-02) made every failed
// SessionIdManager.Validate a 404, as the spec asks for an unknown or
// expired session; Validate of an absent header fails too, so a missing
// Mcp-Session-Id became 404 as well (server/streamable_http.go handlePost).
// Test: TestHTTPSurface; TestPOSTWithoutSession (cli, through the binary).
// Delete when: mcp-go answers 400 for a POST without a session.

import (
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// MissingSession answers 400 for a POST of method (its envelope's) that
// needs a 2025 session and names none, and reports whether it did.
// metaVersion is the body's _meta protocol version: a sessionless
// 2026-07-28 request needs no session, and an unsupported version is
// mcp-go's to refuse.
func MissingSession(w http.ResponseWriter, r *http.Request, method, metaVersion string) (answered bool) {
	v := r.Header.Get("Mcp-Protocol-Version")
	switch {
	case method == "" || method == string(mcp.MethodInitialize) || r.Header.Get("Mcp-Session-Id") != "":
		return false
	case v != "" && !mcp.IsValidProtocolVersion(v):
		return false
	case mcp.IsModernProtocol(v) || mcp.IsModernProtocol(metaVersion):
		return false
	}
	http.Error(w, "Mcp-Session-Id is missing: send initialize first and carry the Mcp-Session-Id header it returns on every later request (2025-11-25 sessions), or send sessionless 2026-07-28 requests (Mcp-Protocol-Version: 2026-07-28 and the protocol version in _meta)", http.StatusBadRequest)
	return true
}
