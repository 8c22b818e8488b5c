package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/mcp"
)

// MethodFunc answers one request of a method an Extension adds, for the
// caller conn (unresolved, as ConnectionFromContext gives it). params are
// the request's raw params (nil when it has none); modern says the request
// came on the 2026-07-28 wire. The result is encoded as the JSON-RPC
// result; a *MethodError becomes that JSON-RPC error, any other error an
// internal one.
type MethodFunc func(ctx context.Context, conn *providers.Connection, params json.RawMessage, modern bool) (any, error)

// MethodError is a JSON-RPC error a MethodFunc answers with, such as
// -32602 (mcp.INVALID_PARAMS) for an unknown skill.
type MethodError = mcpgofix.MethodError

// addMethods routes the Extensions' methods through mcpgofix.Methods
// (mcp-go cannot register a request method).
func addMethods(m *mcpgofix.Methods, exts []Extension) error {
	for _, e := range exts {
		for name, f := range e.Methods {
			err := m.Add(name, func(ctx context.Context, params json.RawMessage, modern bool) (any, error) {
				return f(ctx, ConnectionFromContext(ctx), params, modern)
			})
			if err != nil {
				return fmt.Errorf("mcpserver: %w", err)
			}
		}
	}
	return nil
}

// serveMethodHTTP answers a POST of an extension method f and reports
// whether it did. On the 2026-07-28 wire the Mcp-Method header must name
// the body's method (else mcp-go refuses the mismatch itself); on the
// 2025-11-25 wire the session must be one mcp-go registered (else mcp-go
// answers the request as it would any other).
func (s *Server) serveMethodHTTP(w http.ResponseWriter, r *http.Request, rq *request, env *envelope, f mcpgofix.Method) bool {
	modern := r.Header.Get("Mcp-Protocol-Version") == modernProtocol
	ctx := withRequest(r.Context(), rq)
	if modern {
		if r.Header.Get(mcp.HeaderMethod) != env.Method {
			return false
		}
	} else {
		sess, ok := s.methods.Session(r.Header.Get("Mcp-Session-Id"))
		if !ok {
			return false
		}
		ctx = s.mcp.WithContext(ctx, sess)
	}
	mcpgofix.WriteHTTP(w, mcpgofix.Answer(ctx, s.log, f, bodyBytes(r)), modern)
	return true
}
