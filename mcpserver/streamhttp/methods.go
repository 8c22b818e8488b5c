package streamhttp

import (
	"net/http"

	"github.com/bubbuild/bub-mcp/mcpserver/internal/edge"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/mark3labs/mcp-go/mcp"
)

// serveMethod answers a POST of an extension method f and reports
// whether it did. On the 2026-07-28 wire the Mcp-Method header must name
// the body's method (else mcp-go refuses the mismatch itself); on the
// 2025-11-25 wire the session must be one mcp-go registered (else mcp-go
// answers the request as it would any other).
func (h *Handler) serveMethod(w http.ResponseWriter, r *http.Request, env *edge.Envelope, f mcpgofix.Method) bool {
	modern := r.Header.Get("Mcp-Protocol-Version") == modernProtocol
	ctx := r.Context()
	if modern {
		if r.Header.Get(mcp.HeaderMethod) != env.Method {
			return false
		}
	} else {
		sess, ok := h.core.Methods().Session(r.Header.Get("Mcp-Session-Id"))
		if !ok {
			return false
		}
		ctx = h.core.MCP().WithContext(ctx, sess)
	}
	mcpgofix.WriteHTTP(w, mcpgofix.Answer(ctx, h.log, f, bodyBytes(r)), modern)
	return true
}
