package mcpgofix

// Defect: mcp-go v1.2.1's streamable HTTP handler checks the session only
// on POST: a GET with any Mcp-Session-Id gets a stream (and a new
// session), a DELETE of an unknown id gets 200, a malformed
// Mcp-Protocol-Version is taken for a future sessionless one (405), a GET
// without a session holds an empty stream open, and a method it does not
// serve gets 404 for the endpoint it serves. A client whose session
// expired must hear 404 to start a new one.
// Upstream: mark3labs/mcp-go PR #689 made POSTs with an unknown session
// answer 404; no upstream issue covers GET, DELETE or other methods as of
// 2026-12.
// Test: TestHTTPSurface.
// Delete when: mcp-go answers 404 for a GET or DELETE of an unknown
// session, 400 for a malformed version, and 405 with Allow for other
// methods.

import (
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// CheckStreamRequest answers a non-POST request mcp-go would answer
// wrongly and reports whether it did; known says whether a session id is
// live.
func CheckStreamRequest(w http.ResponseWriter, r *http.Request, known func(id string) bool) (answered bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodDelete {
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, r.Method+" is not supported: MCP uses POST (and GET, DELETE for 2025-11-25 sessions)", http.StatusMethodNotAllowed)
		return true
	}
	sid := r.Header.Get("Mcp-Session-Id")
	switch v := r.Header.Get("Mcp-Protocol-Version"); {
	case v != "" && !mcp.IsValidProtocolVersion(v):
		http.Error(w, "Unsupported protocol version: "+v, http.StatusBadRequest)
	case v == mcp.ProtocolVersion20260728:
		return false // mcp-go answers 405
	case sid == "" && r.Method == http.MethodGet:
		// No stream to listen on: answer at once instead of holding an
		// empty stream open.
		w.Header().Set("Allow", "POST")
		http.Error(w, "GET needs an Mcp-Session-Id (2025-11-25 sessions); the 2026-07-28 protocol has no GET stream", http.StatusMethodNotAllowed)
	case sid == "":
		http.Error(w, "DELETE needs the Mcp-Session-Id of the session to end", http.StatusBadRequest)
	case !known(sid):
		http.Error(w, "Invalid session ID", http.StatusNotFound)
	default:
		return false
	}
	return true
}
