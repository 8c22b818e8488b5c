package mcpgofix

// Defect: on the sessionless 2026-07-28 wire, mcp-go v1.2.1 keys
// in-flight calls by request id alone, so a notifications/cancelled POST
// from any client cancels any other client's call that happens to use the
// same id. On that wire a call is cancelled by closing its own request.
// Upstream: cancellation came with mark3labs/mcp-go PR #756 (#755); no
// upstream issue covers the sessionless keying as of 2026-12; reported
// behaviour: two sessionless clients both calling with id 1, the second
// one's notifications/cancelled{requestId:1} ends the first one's call.
// Test: TestCancelOnlyByTheCaller.
// Delete when: mcp-go ties a sessionless cancellation to its caller (or
// ignores it, as the 2026-07-28 transport asks).

import (
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// StrayCancel reports whether r is a sessionless notifications/cancelled,
// which the edge accepts (202) and ignores instead of handing to mcp-go.
func StrayCancel(r *http.Request) bool {
	return r.Method == http.MethodPost && r.Header.Get("Mcp-Protocol-Version") == mcp.ProtocolVersion20260728 &&
		r.Header.Get(mcp.HeaderMethod) == string(mcp.MethodNotificationCancelled)
}
