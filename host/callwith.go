package host

import (
	"context"
	"encoding/json"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// CallOptions adjust a call made with CallWith. The zero value makes
// CallWith behave like Call without the audit trail.
type CallOptions struct {
	// RunID groups the calls of one turn; empty assigns a fresh one.
	RunID string
	// Lax coerces strings to the schema's scalar types (human input).
	Lax bool
	// State is shared by the calls of one run (ToolContext.State), such
	// as a subagent's allowed_skills.
	State map[string]any
	// EnvSession names the session whose Environment the call uses;
	// empty means the connection's own. A subagent shares its parent's
	// environment (shells, code runner) as Bub's does, instead of
	// starting one per temporary session.
	EnvSession string
}

// CallWith runs one call for a resolved connection as Call does (session,
// Environment, connection and host attached; hooks, spill and rendering
// applied) but writes no audit entries: the caller records the call on
// the tape itself. The agent loop uses it, since it records each model
// step as one tool_call/tool_result pair with the model's call ids, as
// Bub does, and an audit pair per call would show the model every call
// twice.
func (h *Host) CallWith(ctx context.Context, conn *providers.Connection, tool *registry.Tool, args json.RawMessage, peer registry.Peer, opts *CallOptions) registry.Result {
	var o CallOptions
	if opts != nil {
		o = *opts
	}
	ctx, tc, _, perr := h.prepare(ctx, conn, o.EnvSession, o.RunID, o.State, peer)
	if perr != nil {
		return registry.Result{Tool: tool.Name, Err: perr}
	}
	return h.exec.CallTool(ctx, tool, registry.Call{Tool: tool.Name, Args: args, Context: tc, Lax: o.Lax})
}
