package registry

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/sessions"
)

// Connection identifies who is calling: the client, its profile and the
// session it works in. The MCP layer, the agent and the CLI fill it in;
// package providers chooses a View from it, and tools read it through
// ToolContext.Conn.
type Connection struct {
	// Transport is "stdio", "http", "agent" or "cli".
	Transport string
	// Profile names the bub.toml profile in force.
	Profile string
	// Principal is who authenticated (a token's name), empty when anonymous.
	Principal string
	// PrincipalName is the principal's name for people when it is not
	// Principal itself: an OAuth principal's name_claim (Principal is
	// issuer#sub). Logs and the audit record carry it beside Principal.
	PrincipalName string
	// SessionKey is the Bub session whose tape and settings the connection
	// uses.
	SessionKey string
	// Workspace is the directory tools work in.
	Workspace string
	// CodeMode is the session's code-mode switch (or the profile default).
	CodeMode bool
	// ClientName and ClientVersion come from the client's initialize
	// request; informational only (they never change the View).
	ClientName    string
	ClientVersion string
	// OAuthToken is the OAuth access token the caller presented, which
	// the HTTP transport validated as resource server: set for OAuth
	// principals only, for upstreams mounted with auth =
	// "token_exchange" to trade at its issuer. It prints, logs and
	// marshals as nothing (see CallerToken).
	OAuthToken CallerToken
}

// CallerToken holds a caller's bearer token so that it cannot leak by
// accident: fmt, slog and encoding/json see "" (a Connection printed or
// logged whole carries no secret); only Reveal gives the token, to the
// one place that sends it to its issuer.
type CallerToken struct{ raw string }

// NewCallerToken wraps a caller's token.
func NewCallerToken(raw string) CallerToken { return CallerToken{raw: raw} }

// Reveal returns the token itself.
func (t CallerToken) Reveal() string { return t.raw }

// IsSet reports whether there is a token.
func (t CallerToken) IsSet() bool { return t.raw != "" }

// Equal reports whether t and o hold the same token, in constant time; it
// is also what go-cmp compares Connections with (the field is unexported).
func (t CallerToken) Equal(o CallerToken) bool {
	return subtle.ConstantTimeCompare([]byte(t.raw), []byte(o.raw)) == 1
}

// String hides the token.
func (t CallerToken) String() string { return "" }

// GoString hides the token from %#v.
func (t CallerToken) GoString() string { return "registry.CallerToken{}" }

// LogValue hides the token from slog.
func (t CallerToken) LogValue() slog.Value { return slog.StringValue("") }

// MarshalJSON hides the token from encoding/json.
func (t CallerToken) MarshalJSON() ([]byte, error) { return []byte(`""`), nil }

// MarshalText hides the token from text encoders (TOML, YAML, map keys).
func (t CallerToken) MarshalText() ([]byte, error) { return nil, nil }

// Session is what a tool may do with its session: read and annotate its
// tape, switch its settings, spill and read back large results. It is
// storage-neutral (the file store, PostgreSQL and temp/ memory sessions
// look alike); *sessions.Session implements it, and a test may pass its
// own.
type Session interface {
	// ID is the session id as given (e.g. "mcp:default", "temp/1a2b3c4d").
	ID() string
	// Workspace is the resolved workspace the session belongs to.
	Workspace() string
	// Tape is the session's main tape (tape.info, tape.search,
	// tape.anchors, tape.handoff).
	Tape() *sessions.Tape
	// Settings are the session's switches, replayed from its tape.
	Settings() sessions.Settings
	// SetCodeMode records a code-mode switch for the next turn.
	SetCodeMode(enable bool) error
	// LoadTools records deferred tools whose definitions the session has
	// now loaded.
	LoadTools(names []string) error
	// Reset clears the tape and spills (moving them to an archive with
	// archive set) and returns the archive's name.
	Reset(archive bool) (string, error)
	// Spill stores a result too large for the model's context.
	Spill(tool, text string) (sessions.SpillRef, error)
	// ReadSpill reads a bounded page of a spilled result back.
	ReadSpill(handle string, cursor, count int, fromEnd bool) (sessions.SpillPage, error)
}

var _ Session = (*sessions.Session)(nil)

// Tools is what a call may reach of the other tools: the caller's View,
// scoped as the caller is. run_code calls the View's code tools through it
// and subagent lists the caller's direct tools; both stay inside the
// caller's scope and go through the same executor and hooks as any call.
type Tools interface {
	// List returns the caller's tools, each sorted by runtime name: the
	// direct ones (what the model sees) and, in code mode, the code tools
	// (reachable only from run_code).
	List() (direct, code []*Tool)
	// Call runs one of the code tools by runtime or model name, as a
	// nested call of the current one (structured result, CodeMode set).
	// Any other name fails with a not_found error.
	Call(ctx context.Context, name string, args json.RawMessage) Result
}

// ToolContext is what a handler knows about the call beyond its arguments.
// Bub injects the same object as `context`; it never appears in the schema.
// Every collaborator a tool may use is a field here, so a tool is tested
// with a literal ToolContext and ctx carries only cancellation and tracing.
type ToolContext struct {
	// Session is the session's tape, settings and spill storage; nil when
	// the call runs outside any session.
	Session Session
	// Env is the session's environment, nil when the caller has none.
	Env environment.Environment
	// Tools reaches the caller's other tools (run_code's nested calls,
	// subagent); nil when the caller offers none.
	Tools Tools
	// Conn is the caller; nil when unknown.
	Conn *Connection
	// Peer reaches the client that started the call (progress, logs,
	// sampling, elicitation). Nil means nobody listens.
	Peer Peer
	// State is request-scoped data shared by the calls of one run. It is
	// neither persisted nor restored. Handlers must not mutate it
	// concurrently without their own locking.
	State map[string]any
	// RunID identifies the turn or request; equal for every call of a batch.
	RunID string
	// CodeMode is true when the call comes from code inside run_code; such
	// calls are not rendered or spilled.
	CodeMode bool
}

// SessionKey names the call's session: the connection's, or "" when the
// call has no connection.
func (tc *ToolContext) SessionKey() string {
	if tc == nil || tc.Conn == nil {
		return ""
	}
	return tc.Conn.SessionKey
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
	// Key names the question across the rounds of a 2026-07-28
	// multi-round-trip call, where the tool runs again from the start with
	// the answers so far; empty means "sampling-<n>", n counting this
	// call's sampling requests in the order they are made.
	Key string
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
	// URL, when set, makes it a URL-mode elicitation: the client offers
	// the user to open URL (a sign-in) out of band, and only the action
	// comes back; Schema is unused. Ask so only when CanElicitURL.
	URL string
	// Key is as SampleRequest.Key; empty means "elicitation-<n>".
	Key string
}

// Root is one of the client's roots (a directory or file it exposes).
type Root struct {
	URI  string
	Name string
}

// RootsPeer is a Peer that can also list the client's roots; the MCP
// server's peers are.
type RootsPeer interface {
	Roots(ctx context.Context) ([]Root, error)
}

// CapabilityError is returned when a request to the client needs a
// capability the client did not declare (sampling, elicitation, roots).
// A tool that cannot work without one declares it in Tool.Requires, and
// is then refused before it runs.
type CapabilityError struct {
	Capability string
}

func (e *CapabilityError) Error() string {
	return "the client did not declare the " + e.Capability + " capability"
}

// ElicitResult is the user's answer: Action is "accept", "decline" or
// "cancel"; Content is set on accept.
type ElicitResult struct {
	Action  string
	Content map[string]any
}

// ElicitCapable is implemented by Peers that know whether their client
// declared the elicitation capability; it is optional, so a Peer that
// cannot tell need not pretend.
type ElicitCapable interface {
	CanElicit(ctx context.Context) bool
}

// CanElicit reports whether the call's client can be asked for input: it
// has a Peer, and that Peer does not know otherwise (ElicitCapable).
func (tc *ToolContext) CanElicit(ctx context.Context) bool {
	if tc == nil || tc.Peer == nil {
		return false
	}
	if c, ok := tc.Peer.(ElicitCapable); ok {
		return c.CanElicit(ctx)
	}
	return true
}

// URLElicitCapable is implemented by Peers that know whether their
// client declared URL-mode elicitation (elicitation.url).
type URLElicitCapable interface {
	CanElicitURL(ctx context.Context) bool
}

// CanElicitURL reports whether the call's client can be sent to a URL by
// a URL-mode elicitation: its Peer says it declared the capability (a Peer
// that cannot tell counts as no, since a form-only client would show a
// question it cannot answer).
func (tc *ToolContext) CanElicitURL(ctx context.Context) bool {
	if tc == nil || tc.Peer == nil {
		return false
	}
	c, ok := tc.Peer.(URLElicitCapable)
	return ok && c.CanElicitURL(ctx)
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

// Roots lists the client's roots through the call's Peer.
func (tc *ToolContext) Roots(ctx context.Context) ([]Root, error) {
	if tc == nil || tc.Peer == nil {
		return nil, ErrNoPeer
	}
	rp, ok := tc.Peer.(RootsPeer)
	if !ok {
		return nil, &CapabilityError{Capability: "roots"}
	}
	return rp.Roots(ctx)
}
