package mcpserver

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/bubbuild/bub-mcp/internal/reclaim"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/edge"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Limits bound what clients may send; see edge.Limits for each field.
// Every field's zero value means the default named next to it; bub.toml's
// [server] table sets them.
type Limits = edge.Limits

// Defaults of Limits.
const (
	DefaultMaxMessageBytes        = edge.DefaultMaxMessageBytes
	DefaultMaxConcurrentRequests  = edge.DefaultMaxConcurrentRequests
	DefaultMaxConcurrentPerClient = edge.DefaultMaxConcurrentPerClient
	DefaultReadTimeout            = edge.DefaultReadTimeout
	DefaultIdleTimeout            = edge.DefaultIdleTimeout
	DefaultMaxSessions            = edge.DefaultMaxSessions
)

// Transport is the server as its transports (mcpserver/stdio,
// mcpserver/streamhttp) reach it; its type is internal to mcpserver, so
// nothing else can use it.
func (s *Server) Transport() edge.Core { return core{s} }

// core implements edge.Core over a Server.
type core struct{ s *Server }

func (c core) MCP() *server.MCPServer              { return c.s.mcp }
func (c core) Logger() *slog.Logger                { return c.s.log }
func (c core) Limits() edge.Limits                 { return c.s.limits }
func (c core) Reclaimer() *reclaim.Reclaimer       { return c.s.reclaim }
func (c core) Methods() *mcpgofix.Methods          { return &c.s.methods }
func (c core) NeedsAdmission(e edge.Envelope) bool { return c.s.needsAdmission(&e) }
func (c core) Detachable(tool string) bool         { return c.s.detachable(tool) }
func (c core) WaitCalls(ctx context.Context) bool  { return c.s.inflight.Wait(ctx) }
func (c core) CutCalls()                           { c.s.cut() }
func (c core) NextSessionID() int64                { return c.s.stdioSessions.Add(1) }

func (c core) Admit(ctx context.Context, msg []byte) *mcp.JSONRPCError {
	return c.s.admit(ctx, msg)
}

func (c core) Begin(ctx context.Context, header http.Header, out edge.Outbound) (context.Context, *providers.Connection) {
	r := &request{header: header, out: out}
	return withRequest(ctx, r), &r.caller
}

func (c core) Out(ctx context.Context) edge.Outbound {
	if r := requestFrom(ctx); r != nil {
		return r.out
	}
	return nil
}

func (c core) OnSessionEnd(f func(id string)) {
	c.s.endMu.Lock()
	c.s.sessionEnd = append(c.s.sessionEnd, f)
	c.s.endMu.Unlock()
}

// CloseStream ends the SSE stream of the current HTTP request while the
// call continues (SEP-1699 polling): the client resumes with GET and
// Last-Event-ID, and the result is replayed then. It reports false,
// doing nothing, where that is impossible: stdio, the sessionless
// 2026-07-28 protocol, or a tool not marked registry.Tool.ClosesStream.
func CloseStream(ctx context.Context) bool {
	if r := requestFrom(ctx); r != nil && r.out != nil {
		return r.out.CloseStream(ctx)
	}
	return false
}
