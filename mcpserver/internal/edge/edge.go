// Package edge is what mcpserver's transport-neutral core and its
// transports (mcpserver/stdio, mcpserver/streamhttp) share, and nothing
// else: the contract between them (Core, Outbound), the envelope a
// transport decodes once where a message enters, the bounds both keep,
// and their small plumbing (Calls).
package edge

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/internal/reclaim"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Core is what a transport needs of the server it carries
// (mcpserver.Server.Transport returns it).
type Core interface {
	// MCP is the mcp-go server whose HandleMessage answers every request.
	MCP() *server.MCPServer
	// Logger gets the transport's logs.
	Logger() *slog.Logger
	// Limits are the bounds in effect, defaults filled in.
	Limits() Limits
	// Reclaimer gives back the memory of large messages; nil: none.
	Reclaimer() *reclaim.Reclaimer
	// Methods are the request methods Extensions add, which mcp-go does
	// not know (mcpgofix/methods.go).
	Methods() *mcpgofix.Methods
	// Begin attaches one request's state to ctx: the HTTP header (nil on
	// stdio) and the transport's way back to the client (nil: through
	// mcp-go alone). It returns the request's caller, which the transport
	// fills in (who is calling, as it identified them) before it hands
	// the request to mcp-go, and leaves alone after. Every request a
	// transport hands to the core is begun first.
	Begin(ctx context.Context, header http.Header, out Outbound) (context.Context, *providers.Connection)
	// Out is the Outbound Begin attached to ctx, or nil.
	Out(ctx context.Context) Outbound
	// NeedsAdmission reports whether a 2026-07-28 tools/call must be
	// admitted before dispatch (Admit).
	NeedsAdmission(env Envelope) bool
	// Admit checks a 2026-07-28 tools/call of a begun ctx before
	// dispatch, for the refusals mcp-go cannot give from inside a
	// handler; nil means dispatch.
	Admit(ctx context.Context, msg []byte) *mcp.JSONRPCError
	// Detachable reports whether calls of the tool (by model name) may
	// close their HTTP stream (registry.Tool.ClosesStream).
	Detachable(tool string) bool
	// WaitCalls waits for the tool calls in flight, at most until ctx
	// ends; it reports whether they all ended.
	WaitCalls(ctx context.Context) bool
	// CutCalls ends the shutdown grace: running calls are cancelled and
	// answer "server shutting down".
	CutCalls()
	// OnSessionEnd registers f to run when a 2025 session ends (however
	// it ends), with its id. Transports register at construction.
	OnSessionEnd(f func(id string))
	// NextSessionID numbers a stdio connection's session, which mcp-go
	// tells apart by id; unique per Server.
	NextSessionID() int64
}

// Outbound is how one request reaches its client outside its answer.
// The core calls it and never asks which transport it is on; each
// transport supplies its own.
type Outbound interface {
	// Progress sends a notifications/progress; it reports whether the
	// answer must wait for it to be written (WaitWritten,
	// mcpgofix/dropnotify.go).
	Progress(ctx context.Context, params map[string]any) (wait bool)
	// Log sends a notifications/message, as Progress.
	Log(ctx context.Context, n mcp.LoggingMessageNotification) (wait bool)
	// WaitWritten holds the answer until n of the notifications Progress
	// and Log said to wait for were written, within a bound.
	WaitWritten(ctx context.Context, n int)
	// BeforeRequest readies the way for a request to the client
	// (sampling, elicitation, roots).
	BeforeRequest(ctx context.Context) error
	// AnsweredInitialize is told when a 2025 initialize was answered.
	AnsweredInitialize()
	// Drop keeps the request's answer from being sent: the client
	// cancelled it or is gone.
	Drop()
	// CloseStream ends the request's response stream while its call goes
	// on (SEP-1699 polling); false where the transport cannot.
	CloseStream(ctx context.Context) bool
}

// ViaMCP sends a request's notifications through mcp-go's session, as
// the transports that do not write them themselves do.
type ViaMCP struct {
	MCP    *server.MCPServer
	Logger *slog.Logger
}

// Progress sends params through mcp-go.
func (o ViaMCP) Progress(ctx context.Context, params map[string]any) bool {
	if err := o.MCP.SendNotificationToClient(ctx, "notifications/progress", params); err != nil {
		o.Logger.DebugContext(ctx, "mcp.progress.dropped", "error", err)
		return false
	}
	return true
}

// Log sends n through mcp-go, which leaves out what the client's level
// does not want (then nothing is to be waited for).
func (o ViaMCP) Log(ctx context.Context, n mcp.LoggingMessageNotification) bool {
	if err := o.MCP.SendLogMessageToClient(ctx, n); err != nil {
		o.Logger.DebugContext(ctx, "mcp.log.dropped", "error", err)
		return false
	}
	return mcpgofix.LogWanted(ctx, n.Params.Level)
}

// WaitWritten does not wait: nothing tells when mcp-go wrote.
func (ViaMCP) WaitWritten(context.Context, int) {}

// BeforeRequest has nothing to ready.
func (ViaMCP) BeforeRequest(context.Context) error { return nil }

// AnsweredInitialize needs nothing.
func (ViaMCP) AnsweredInitialize() {}

// Drop cannot stop mcp-go's answer.
func (ViaMCP) Drop() {}

// CloseStream cannot.
func (ViaMCP) CloseStream(context.Context) bool { return false }

// Calls counts work in flight (tool calls, HTTP answers being written).
// Unlike a sync.WaitGroup it may grow while a shutdown waits for it to
// drain (a queued stdio request starting late), which a WaitGroup
// forbids.
type Calls struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // made by a waiter, closed when n drops to zero
}

// Add counts one more.
func (c *Calls) Add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

// Done counts one less.
func (c *Calls) Done() {
	c.mu.Lock()
	if c.n--; c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// Wait returns true once nothing is in flight, false when ctx ends first.
// The channel it waits on is made here, not by every call that finds none
// in flight: only a shutdown waits.
func (c *Calls) Wait(ctx context.Context) bool {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return true
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}

// RPCError is mcpgofix.RPCError: the raw id is echoed byte for byte.
func RPCError(rawID json.RawMessage, code int, message string) mcp.JSONRPCError {
	return mcpgofix.RPCError(rawID, code, message)
}

// ShutdownTimeout bounds how long closing transports may take after
// calls were cancelled.
const ShutdownTimeout = 5 * time.Second
