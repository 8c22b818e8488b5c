package registry

import (
	"context"
	"encoding/json"
	"log/slog"
)

// Environment is the part of a session's execution environment the registry
// hands to tools. It is deliberately tiny: tools that spawn processes or touch
// files assert the richer interface they need (environment.Environment), so
// this package does not depend on any implementation.
type Environment interface {
	Workspace() string
}

// ToolContext is what a handler knows about the call beyond its arguments.
// Bub injects the same object as `context`; it never appears in the schema.
type ToolContext struct {
	// SessionID names the session whose tape, settings and environment the
	// call belongs to.
	SessionID string
	// RunID identifies the turn or request; equal for every call of a batch.
	RunID string
	// State is request-scoped data shared by the calls of one run. It is
	// neither persisted nor restored. Handlers must not mutate it
	// concurrently without their own locking.
	State map[string]any
	// CodeMode is true when the call comes from code inside run_code; such
	// calls are not rendered or spilled.
	CodeMode bool
	// Env is the session's environment, nil when the caller has none.
	Env Environment
	// Peer reaches the client that started the call (progress, logs,
	// sampling, elicitation). Nil means nobody listens.
	Peer Peer
}

// Progress reports progress to whoever listens; a no-op without a Peer.
func (tc *ToolContext) Progress(ctx context.Context, progress, total float64, message string) {
	if tc != nil && tc.Peer != nil {
		tc.Peer.Progress(ctx, progress, total, message)
	}
}

// Log sends a log record to the client; a no-op without a Peer.
func (tc *ToolContext) Log(ctx context.Context, level slog.Level, logger string, data any) {
	if tc != nil && tc.Peer != nil {
		tc.Peer.Log(ctx, level, logger, data)
	}
}

// Peer is the client side of a call, as far as a tool may use it. The MCP
// server implements it per request; the agent loop implements it for its
// renderer. Methods must be safe to call from many goroutines.
type Peer interface {
	// Progress is best-effort and never blocks the tool for long.
	Progress(ctx context.Context, progress, total float64, message string)
	// Log is best-effort; level follows slog (MCP levels are mapped).
	Log(ctx context.Context, level slog.Level, logger string, data any)
	// Sample asks the client's model for a completion.
	Sample(ctx context.Context, req SampleRequest) (*SampleResult, error)
	// Elicit asks the human behind the client for structured input.
	Elicit(ctx context.Context, req ElicitRequest) (*ElicitResult, error)
}

// SampleRequest asks the client's model for one message.
type SampleRequest struct {
	Messages     []SampleMessage
	SystemPrompt string
	MaxTokens    int
}

// SampleMessage is one plain-text message of a sampling request.
type SampleMessage struct {
	Role string // "user" or "assistant"
	Text string
}

// SampleResult is the client's model reply.
type SampleResult struct {
	Role       string
	Text       string
	Model      string
	StopReason string
}

// ElicitRequest asks the user for input matching a flat JSON schema.
type ElicitRequest struct {
	Message string
	Schema  json.RawMessage
}

// ElicitResult is the user's answer: Action is "accept", "decline" or
// "cancel"; Content is set on accept.
type ElicitResult struct {
	Action  string
	Content map[string]any
}

// ErrNoPeer is returned by helpers when a call has no client to ask.
var ErrNoPeer = &Error{Kind: KindConfig, Message: "this call has no client that can answer requests"}

// Sample asks the client's model through the call's Peer.
func (tc *ToolContext) Sample(ctx context.Context, req SampleRequest) (*SampleResult, error) {
	if tc == nil || tc.Peer == nil {
		return nil, ErrNoPeer
	}
	return tc.Peer.Sample(ctx, req)
}

// Elicit asks the user through the call's Peer.
func (tc *ToolContext) Elicit(ctx context.Context, req ElicitRequest) (*ElicitResult, error) {
	if tc == nil || tc.Peer == nil {
		return nil, ErrNoPeer
	}
	return tc.Peer.Elicit(ctx, req)
}
