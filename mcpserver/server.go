// Package mcpserver serves a tool registry over the Model Context Protocol,
// on stdio and streamable HTTP, with mark3labs/mcp-go underneath.
//
// Every agent-visible tool is registered with mcp-go once; what a given
// client may list and call is decided per request by a tool filter that
// asks the Backend for the connection's View. mcp-go applies that filter to
// tools/list and again to tools/call, so the View is an access boundary and
// the same code serves the session-based 2025 protocol and the sessionless
// 2026-07-28 one.
//
// mcp-go's MCPServer.HandleMessage answers every request of every era and
// transport, so its middleware, hooks and cancellation apply to all. This
// package is the transport-neutral core; each transport is a package of
// its own: mcpserver/stdio (a bounded line transport around
// HandleMessage) and mcpserver/streamhttp (mcp-go's StreamableHTTPServer
// behind a chain of middleware). A transport reaches the core through
// Server.Transport and gives each request its way back to the client (an
// Outbound), so nothing here asks which transport it is on. On the
// 2026-07-28 wire a tool's questions to the client become multi-round-trip
// input requests (input.go); requests are traced when telemetry is on
// (telemetry.go).
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/internal/reclaim"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/edge"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/telemetry"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Backend is what the server needs from the application: who a connection
// is, what it sees, and how a call runs. *app.App implements it; tests may
// fake it.
type Backend interface {
	// Resolve completes a connection the transport identified (profile,
	// principal) with its session key, workspace and code-mode setting. It
	// fails for an unknown profile.
	Resolve(ctx context.Context, conn *providers.Connection) error
	// View returns the connection's View.
	View(ctx context.Context, conn *providers.Connection) (*providers.View, error)
	// Call runs one call through the application's single call path;
	// the server's calls are app.Direct ones, of tools in the
	// connection's View.
	Call(ctx context.Context, conn *providers.Connection, req app.Request) registry.Result
}

// Options configure a Server. Zero values are documented per field.
type Options struct {
	// Name and Version identify the server in initialize; default
	// "bub-mcp" and "dev".
	Name, Version string
	// Backend is required.
	Backend Backend
	// Reclaimer bounds and gives back the memory of large messages; the
	// process's one (reclaim.New in the command that serves), shared by
	// its servers. Nil means none: the runtime's defaults.
	Reclaimer *reclaim.Reclaimer
	// Registry supplies every tool any View may contain; default
	// registry.Default.
	Registry *registry.Registry
	// Extensions add resources, prompts and completions.
	Extensions []Extension
	// Logger gets server logs; default slog.Default().
	Logger *slog.Logger
	// Limits bounds what clients may send; zero fields take the
	// defaults documented on Limits.
	Limits Limits
	// StateKey seals the requestState of multi-round-trip calls (see
	// LoadStateKey); nil means a random key, valid for this process only.
	StateKey []byte
	// Telemetry traces and measures every request (see telemetry.go);
	// nil or disabled installs nothing.
	Telemetry *telemetry.Telemetry
	// RootsWorkspace reports whether a profile's connections take their
	// workspace from the client's roots (serve: no --workspace and no
	// profile workspace). Those of a 2025 session whose client declares
	// roots are asked after notifications/initialized and on
	// notifications/roots/list_changed; the first file:// root that is a
	// directory becomes the connection's workspace. nil: never.
	RootsWorkspace func(profile string) bool
}

// Server is an MCP server over a Backend.
type Server struct {
	mcp     *server.MCPServer
	backend Backend
	log     *slog.Logger
	reg     *registry.Registry
	limits  Limits

	inflight edge.Calls

	// cutCtx ends when the shutdown grace is over. It cancels calls apart
	// from their HTTP requests, whose cancellation would stop mcp-go from
	// writing the "server shutting down" answer.
	cutCtx context.Context
	cut    context.CancelFunc

	reclaim *reclaim.Reclaimer // Options.Reclaimer; nil: none

	sealer sealer // seals 2026-07-28 requestState

	instrumented bool // telemetry hooks installed (telemetry.go)

	stdioSessions atomic.Int64 // numbers stdio sessions, which mcp-go tells apart by id

	endMu      sync.Mutex
	sessionEnd []func(id string) // transports' (edge.Core.OnSessionEnd)

	served served // tools registered with mcp-go (dynamic.go)

	methods mcpgofix.Methods // request methods Extensions add (methods.go)

	roots rootsWorkspaces // workspaces from clients' roots (roots.go)

	live lives // Live Extensions (live.go)
}

type requestKey struct{}

// request is one request's state in the core, attached to its context by
// the transport that read it (edge.Core.Begin), under a single key. What
// only a transport needs (stdio's reading baton, HTTP's response writer
// and session slot) is the transport's, behind out.
type request struct {
	// caller is who is calling, as the transport identified them.
	caller providers.Connection
	header http.Header   // the HTTP request's (trace context); nil on stdio
	out    edge.Outbound // the transport's way back to the client; nil: mcp-go's
	memo   callMemo
}

// callMemo is what the core works out once per request and reads in
// several of mcp-go's hooks and handlers.
type callMemo struct {
	mu      sync.Mutex
	conn    *providers.Connection
	view    *providers.View
	state   *sealedState                   // the requestState admit verified (2026-07-28)
	calling string                         // the tools/call's tool name: a deferred one passes the gate
	meta    map[string]any                 // the request's _meta "bub/state" (tools/list, tools/call): its code_mode picks the View
	span    atomic.Pointer[telemetry.Span] // set by the BeforeAny hook when tracing
}

// withRequest attaches r to ctx.
func withRequest(ctx context.Context, r *request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// requestFrom is the request state a transport attached, or nil.
func requestFrom(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// drop keeps the request's answer from being sent: the client cancelled
// the request (notifications/cancelled, whose receivers "SHOULD NOT send a
// response for the cancelled request") or is gone.
func (r *request) drop() {
	if r.out != nil {
		r.out.Drop()
	}
}

// resolve returns the caller's resolved connection and View, once per
// request.
func (s *Server) resolve(ctx context.Context) (*providers.Connection, *providers.View, error) {
	r := requestFrom(ctx)
	if r != nil {
		r.memo.mu.Lock()
		defer r.memo.mu.Unlock()
		if r.memo.view != nil {
			return r.memo.conn, r.memo.view, nil
		}
	}
	conn := ConnectionFromContext(ctx)
	if conn.Workspace == "" {
		conn.Workspace = s.rootsWorkspace(ctx, conn.Profile)
	}
	if err := s.backend.Resolve(ctx, conn); err != nil {
		return nil, nil, err
	}
	if r != nil {
		// A per-request code-mode switch (_meta "bub/state" code_mode),
		// for this request's View only.
		if err := app.ApplyState(conn, r.memo.meta); err != nil {
			return nil, nil, err
		}
	}
	v, err := s.backend.View(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	if r != nil {
		r.memo.conn, r.memo.view = conn, v
	}
	return conn, v, nil
}

// New builds a Server. The tool set is taken from the registry now.
func New(opts *Options) (*Server, error) {
	if opts == nil || opts.Backend == nil {
		return nil, errors.New("mcpserver: Options.Backend is required")
	}
	o := *opts
	if o.Name == "" {
		o.Name = "bub-mcp"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Registry == nil {
		o.Registry = registry.Default
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Limits = o.Limits.WithDefaults()
	s := &Server{backend: o.Backend, log: o.Logger, reg: o.Registry, limits: o.Limits, reclaim: o.Reclaimer, sealer: sealer{key: o.StateKey}}
	s.cutCtx, s.cut = context.WithCancel(context.Background())
	if s.sealer.key == nil {
		k, err := randomKey()
		if err != nil {
			return nil, err
		}
		s.sealer.key = k
	}

	hooks := &server.Hooks{}
	hooks.AddAfterInitialize(func(ctx context.Context, id any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
		// The session may not know the client yet: take it from the request.
		conn := ConnectionFromContext(ctx)
		conn.ClientName, conn.ClientVersion = req.Params.ClientInfo.Name, req.Params.ClientInfo.Version
		s.instructions(ctx, conn, &res.Instructions)
		if r := requestFrom(ctx); r != nil && r.out != nil {
			r.out.AnsweredInitialize()
		}
	})
	readable := map[string]func(ctx context.Context, conn *providers.Connection) bool{}
	for _, e := range o.Extensions {
		for uri, f := range e.Readable {
			readable[uri] = f
		}
	}
	hooks.AddAfterListResources(func(ctx context.Context, id any, req *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		kept := res.Resources[:0]
		idx, visible := s.live.load(), visibleFunc(ctx)
		for _, r := range res.Resources {
			if f, ok := readable[r.URI]; (!ok || f(ctx, ConnectionFromContext(ctx))) && s.liveResourceVisible(visible, idx, r.URI) {
				kept = append(kept, r)
			}
		}
		res.Resources = kept
		if res.NextCursor == "" {
			for _, e := range o.Extensions {
				if e.CallerResources != nil {
					for _, r := range e.CallerResources(ctx, ConnectionFromContext(ctx)) {
						res.Resources = append(res.Resources, mcp.NewResource(r.URI, r.Name, mcp.WithResourceDescription(r.Description), mcp.WithMIMEType(r.MIMEType)))
					}
				}
			}
		}
	})
	// The acknowledgement is a notification: mcpgofix/dropnotify.go.
	hooks.AddAfterSubscriptionsListen(mcpgofix.ListenAcknowledged(func(ctx context.Context) { s.outboundOf(ctx).WaitWritten(ctx, 1) }))
	hooks.AddBeforeCallTool(func(ctx context.Context, id any, req *mcp.CallToolRequest) {
		if r := requestFrom(ctx); r != nil {
			state, _ := callerState(*req) // a bad one is refused by handle
			r.memo.mu.Lock()
			r.memo.calling, r.memo.meta = req.Params.Name, state
			r.memo.mu.Unlock()
		}
	})
	hooks.AddBeforeListTools(func(ctx context.Context, id any, req *mcp.ListToolsRequest) {
		if r := requestFrom(ctx); r != nil && req.Params.Meta != nil {
			state, _ := metaState(req.Params.Meta)
			r.memo.mu.Lock()
			r.memo.meta = state
			r.memo.mu.Unlock()
		}
	})
	hooks.AddOnUnregisterSession(func(ctx context.Context, sess server.ClientSession) {
		// However a 2025 session ends (DELETE, idle sweep, shutdown), the
		// transports' state of it goes with it.
		s.endMu.Lock()
		ends := s.sessionEnd
		s.endMu.Unlock()
		for _, f := range ends {
			f(sess.SessionID())
		}
	})
	hooks.AddAfterDiscover(func(ctx context.Context, id any, req *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
		s.instructions(ctx, ConnectionFromContext(ctx), &res.Instructions)
	})
	if s.instrumented = o.Telemetry.Enabled(); s.instrumented {
		addTelemetry(hooks, o.Telemetry)
	}
	s.roots.use = o.RootsWorkspace
	s.watchRoots(hooks)
	watcher, dynamic := o.Backend.(toolWatcher)
	dynamic = dynamic && watcher.ToolsChangeable()
	serverOpts := []server.ServerOption{
		// Tool lists change only when a module's tools do (upstream
		// servers); then clients are told.
		server.WithToolCapabilities(dynamic),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithHooks(hooks),
		server.WithToolFilter(s.filter),
	}
	capabilities := map[string]any{}
	for _, e := range o.Extensions {
		serverOpts = append(serverOpts, extensionOptions(&e)...)
		for id, settings := range e.Capabilities.Extensions {
			capabilities[id] = settings
		}
	}
	if len(capabilities) > 0 {
		serverOpts = append(serverOpts, server.WithExtensions(capabilities))
	}
	// After the Extensions' own: a Live one's capabilities include theirs.
	s.addLive(hooks, o.Extensions)
	if len(s.live.exts) > 0 {
		serverOpts = append(serverOpts, liveOptions(o.Extensions)...)
		serverOpts = append(serverOpts, server.WithPromptFilter(s.liveFilter))
	}
	if c := newCompleter(o.Extensions); c != nil {
		serverOpts = append(serverOpts, server.WithPromptCompletionProvider(c), server.WithResourceCompletionProvider(c))
	}
	if err := addMethods(&s.methods, o.Extensions); err != nil {
		return nil, err
	}
	s.methods.Track(hooks)
	s.mcp = server.NewMCPServer(o.Name, o.Version, serverOpts...)
	if s.roots.use != nil {
		s.mcp.AddNotificationHandler("notifications/initialized", s.askRoots)
		s.mcp.AddNotificationHandler(mcp.MethodNotificationRootsListChanged, s.askRoots)
	}
	s.syncTools() // the first table: no session yet to tell
	if dynamic {
		watcher.OnToolsChanged(s.syncTools)
	}
	for _, e := range o.Extensions {
		addExtension(s.mcp, &e)
	}
	s.startLive()
	return s, nil
}

// MCP exposes the underlying mcp-go server, for tests that look beneath
// the Extension API.
func (s *Server) MCP() *server.MCPServer { return s.mcp }

// view resolves conn through the Backend and returns its View.
func (s *Server) view(ctx context.Context, conn *providers.Connection) (*providers.View, error) {
	if err := s.backend.Resolve(ctx, conn); err != nil {
		return nil, err
	}
	return s.backend.View(ctx, conn)
}

// instructions sets *dst to the instructions of conn's View, if it has one.
func (s *Server) instructions(ctx context.Context, conn *providers.Connection, dst *string) {
	if v, err := s.view(ctx, conn); err == nil {
		*dst = v.Instructions
	}
}

// filter is mcp-go's tool filter. For tools/list it ignores the global
// list and returns the connection's View; for mcp-go's tools/call gate,
// which passes the one tool called, it passes that tool if the View can
// call it.
func (s *Server) filter(ctx context.Context, in []mcp.Tool) []mcp.Tool {
	_, v, err := s.resolve(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "mcp.view.failed", "error", err)
		return nil
	}
	if r := requestFrom(ctx); r != nil {
		r.memo.mu.Lock()
		name := r.memo.calling
		r.memo.mu.Unlock()
		if name != "" {
			// Listed or deferred: a deferred tool is not listed but may
			// be called by name.
			if _, ok := v.Lookup(name); ok {
				return in
			}
			return nil
		}
	}
	// Only what mcp-go will dispatch is listed: a View shows a new tool
	// as soon as the registry has it, and mcp-go's table gets it a moment
	// later (syncTools, which then tells clients). Listing it sooner made
	// a client's call of a listed tool fail with "not found".
	// Cached on the View itself, so it is freed with the View, per state
	// of the served table.
	set := s.served.load()
	return v.Memo(mcpToolsKey{set}, func() any {
		out := make([]mcp.Tool, 0, len(v.Tools))
		for _, t := range v.Tools {
			if _, ok := set.tools[t.ModelName()]; ok {
				out = append(out, MCPTool(t))
			}
		}
		return out
	}).([]mcp.Tool)
}

// Memo keys of the per-View work the server caches.
type (
	mcpToolsKey  struct{ set *servedSet }
	objectOutKey struct{ tool *registry.Tool }
)

// MCPTool maps a registry tool onto its MCP definition. Every annotation is
// sent explicitly: absent hints mean "destructive, open world" to clients.
func MCPTool(t *registry.Tool) mcp.Tool {
	if src, ok := t.Source.(sourced); ok {
		// As its source defined it (hints left unset stay unset), under
		// our name and with the description the View gives it.
		mt := src.MCPTool()
		mt.Name, mt.Description = t.ModelName(), t.Description
		mt.InputSchema, mt.RawInputSchema = mcp.ToolInputSchema{}, t.InputSchema
		return mt
	}
	mt := mcp.NewToolWithRawSchema(t.ModelName(), t.Description, t.InputSchema)
	if isObjectSchema(t.OutputSchema) {
		mcp.WithRawOutputSchema(t.OutputSchema)(&mt)
	}
	a := t.Annotations
	mt.Annotations = mcp.ToolAnnotation{
		Title:           a.Title,
		ReadOnlyHint:    mcp.ToBoolPtr(a.ReadOnly),
		DestructiveHint: mcp.ToBoolPtr(a.Destructive),
		IdempotentHint:  mcp.ToBoolPtr(a.Idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(a.OpenWorld),
	}
	return mt
}

// structured reports whether t's results carry structuredContent (an
// object output schema), parsing each tool's schema once.
func (s *Server) structured(v *providers.View, t *registry.Tool) bool {
	return v.Memo(objectOutKey{t}, func() any { return isObjectSchema(t.OutputSchema) }).(bool)
}

func isObjectSchema(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	var s struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(raw, &s) == nil && s.Type == "object"
}

// ErrToolNotFound is returned (as a protocol error) for a tool outside the
// caller's View.
var ErrToolNotFound = errors.New("tool not found")

// handle is the single mcp-go tool handler: it resolves the tool in the
// caller's View (never in the registry: a hidden tool stays hidden even if
// mcp-go's own gate were bypassed) and runs it through the Backend.
func (s *Server) handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s.inflight.Add()
	defer s.inflight.Done()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(s.cutCtx, stop)()
	if s.instrumented {
		ctx = withSpan(ctx)
	}
	conn, v, err := s.resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	tool, ok := v.Lookup(req.Params.Name)
	if !ok {
		return nil, fmt.Errorf("tool '%s' not found: %w", req.Params.Name, ErrToolNotFound)
	}
	call, err := toolCall(req)
	if err != nil {
		return mcp.NewToolResultError(fmt.Sprintf("[invalid_input] Tool '%s' argument validation failed.\n%v", tool.Name, err)), nil
	}
	state, err := callerState(req)
	if err != nil {
		return mcp.NewToolResultError("[invalid_input] " + err.Error()), nil
	}
	p := &peer{s: s, token: progressToken(req), out: s.outboundOf(ctx)}
	if info := modernInfo(ctx); info != nil {
		for _, c := range tool.Requires {
			if !hasCapability(info.ClientCapabilities, c) {
				return nil, &registry.CapabilityError{Capability: c}
			}
		}
		r := requestFrom(ctx)
		st := r.inputState()
		if st == nil && req.Params.RequestState != "" {
			// Not checked before dispatch (a transport that does not admit
			// calls itself): verify here.
			if st, err = s.sealer.open(req.Params.RequestState, tool.ModelName(), argsDigest(call.Args), callerID(r), time.Now()); err != nil {
				return nil, err
			}
		}
		p.round = newInputRound(info.ClientCapabilities, st, req.Params.InputResponses)
	}
	res := s.backend.Call(ctx, conn, app.Request{Tool: tool.Name, Args: call.Args, Decoded: call.Decoded, Peer: p, State: state})
	if ctx.Err() != nil {
		if s.cutCtx.Err() != nil {
			return mcp.NewToolResultError(shuttingDown), nil
		}
		// Cancelled by mcp-go (the client's notifications/cancelled) or
		// by the transport (the client went away): nobody waits for it.
		if r := requestFrom(ctx); r != nil {
			r.drop()
		}
	}
	if p.round != nil && len(p.round.pending()) > 0 {
		// The run asked what this request does not answer: whatever it
		// returned was computed without the answers, so ask for them.
		return p.round.result(s.sealer, tool.ModelName(), argsDigest(call.Args), callerID(requestFrom(ctx)), time.Now())
	}
	if n := p.sent.Load(); n > 0 {
		p.out.WaitWritten(ctx, int(n)) // mcpgofix/dropnotify.go
	}
	return s.toResult(v, tool, &res), nil
}

// toolCall takes the arguments as mcp-go parsed them: the raw bytes it
// keeps, with their decoding when it made one, so they are neither
// encoded nor decoded again.
func toolCall(req mcp.CallToolRequest) (registry.Call, error) {
	if raw := req.Params.RawArguments; len(raw) > 0 && req.Params.Arguments != nil { // not "null"
		c := registry.Call{Args: raw}
		c.Decoded, _ = req.Params.Arguments.(map[string]any)
		return c, nil
	}
	switch a := req.Params.Arguments.(type) {
	case nil:
		return registry.Call{Args: json.RawMessage("{}")}, nil
	case json.RawMessage:
		return registry.Call{Args: a}, nil
	default:
		b, err := json.Marshal(a)
		if err != nil {
			return registry.Call{}, fmt.Errorf("arguments: %w", err)
		}
		return registry.Call{Args: b}, nil
	}
}

func progressToken(req mcp.CallToolRequest) mcp.ProgressToken {
	if req.Params.Meta == nil {
		return nil
	}
	return req.Params.Meta.ProgressToken
}

// toResult maps a registry result onto MCP: the rendered text (after spill)
// as content, the raw value as structuredContent when the tool declares an
// object output schema, and tool errors as isError results.
func (s *Server) toResult(v *providers.View, t *registry.Tool, res *registry.Result) *mcp.CallToolResult {
	if res.Err != nil {
		var p passthrough
		if errors.As(res.Err, &p) { // an upstream's isError result
			return p.MCPResult(res.Err.Message)
		}
		text := res.Err.Error()
		if len(res.Err.Details) > 0 {
			if b, err := json.Marshal(res.Err.Details); err == nil {
				text += "\n" + string(b)
			}
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: true}
		if len(res.Err.Meta) > 0 {
			out.Meta = mcp.NewMetaFromMap(maps.Clone(res.Err.Meta))
		}
		return out
	}
	if p, ok := res.Value.(passthrough); ok {
		return p.MCPResult(res.Text)
	}
	if cs, ok := res.Value.(registry.Contents); ok {
		return &mcp.CallToolResult{Content: contents(cs)}
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(res.Text)}}
	if res.Value != nil && s.structured(v, t) {
		// Encoded here, once: a value JSON cannot carry (NaN, ±Inf)
		// would otherwise fail the whole reply inside mcp-go. Leaving
		// structuredContent out would not do either: clients refuse a
		// result without it from a tool with an output schema (the
		// TypeScript SDK throws), so it becomes a tool error that says
		// why, with the value as text.
		b, err := json.Marshal(res.Value)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{mcp.NewTextContent(
				fmt.Sprintf("%s: tool result is not JSON serializable, so it cannot be its structuredContent (%v); as text: %s", t.Name, err, res.Text))}}
		}
		out.StructuredContent = json.RawMessage(b)
	}
	return out
}

func contents(cs registry.Contents) []mcp.Content {
	out := make([]mcp.Content, 0, len(cs))
	for _, c := range cs {
		switch c.Type {
		case "image":
			out = append(out, mcp.NewImageContent(c.Base64(), c.MIMEType))
		case "audio":
			out = append(out, mcp.NewAudioContent(c.Base64(), c.MIMEType))
		case "resource":
			if c.Data != nil {
				out = append(out, mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: c.URI, MIMEType: c.MIMEType, Blob: c.Base64()}))
			} else {
				out = append(out, mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: c.URI, MIMEType: c.MIMEType, Text: c.Text}))
			}
		default:
			out = append(out, mcp.NewTextContent(c.Text))
		}
	}
	return out
}

// peer is the registry.Peer of one MCP request.
type peer struct {
	s     *Server
	token mcp.ProgressToken
	out   edge.Outbound // the request's way to its client
	sent  atomic.Int64  // notifications handed to mcp-go, which the result waits for
	round *inputRound   // 2026-07-28 requests: answers and pending questions
}

func (p *peer) Progress(ctx context.Context, progress, total float64, message string) {
	if p.token == nil {
		return
	}
	params := map[string]any{"progressToken": p.token, "progress": progress}
	if total > 0 {
		params["total"] = total
	}
	if message != "" {
		params["message"] = message
	}
	if p.out.Progress(ctx, params) {
		p.sent.Add(1)
	}
}

func (p *peer) Log(ctx context.Context, level slog.Level, logger string, data any) {
	lvl := mcpLevel(level)
	if p.out.Log(ctx, mcp.NewLoggingMessageNotification(lvl, logger, data)) {
		p.sent.Add(1)
	}
}

// outboundOf is the way back to ctx's client: what its transport gave
// the request, else what its session offers (a stdio connection, for the
// notifications it reads), else mcp-go's.
func (s *Server) outboundOf(ctx context.Context) edge.Outbound {
	if r := requestFrom(ctx); r != nil && r.out != nil {
		return r.out
	}
	if o, ok := server.ClientSessionFromContext(ctx).(edge.Outbound); ok {
		return o
	}
	return edge.ViaMCP{MCP: s.mcp, Logger: s.log}
}

func mcpLevel(l slog.Level) mcp.LoggingLevel {
	switch {
	case l >= slog.LevelError+4:
		return mcp.LoggingLevelCritical
	case l >= slog.LevelError:
		return mcp.LoggingLevelError
	case l >= slog.LevelWarn:
		return mcp.LoggingLevelWarning
	case l >= slog.LevelInfo+2:
		return mcp.LoggingLevelNotice
	case l >= slog.LevelInfo:
		return mcp.LoggingLevelInfo
	default:
		return mcp.LoggingLevelDebug
	}
}

func (p *peer) Sample(ctx context.Context, req registry.SampleRequest) (*registry.SampleResult, error) {
	msgs := make([]mcp.SamplingMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = mcp.SamplingMessage{Role: mcp.Role(m.Role), Content: mcp.NewTextContent(m.Text)}
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 1024
	}
	r := mcp.CreateMessageRequest{}
	r.Messages = msgs
	r.SystemPrompt = req.SystemPrompt
	r.MaxTokens = maxTokens
	if modernInfo(ctx) != nil {
		resp, err := p.askModern("sampling", req.Key, mcp.NewSamplingInputRequest(r.CreateMessageParams))
		if err != nil {
			return nil, err
		}
		if resp.Sampling == nil {
			return nil, errors.New("mcpserver: the client's sampling answer is empty")
		}
		return sampleResult(resp.Sampling), nil
	}
	if !declared(ctx, func(c mcp.ClientCapabilities) bool { return c.Sampling != nil }) {
		return nil, &registry.CapabilityError{Capability: "sampling"} // mcp-go would ask anyway
	}
	if err := p.out.BeforeRequest(ctx); err != nil {
		return nil, err
	}
	//lint:ignore SA1019 2025-protocol clients still sample this way; 2026 ones get an error from mcp-go
	res, err := p.s.mcp.RequestSampling(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: sampling: %w", err)
	}
	return sampleResult(res), nil
}

func sampleResult(res *mcp.CreateMessageResult) *registry.SampleResult {
	out := &registry.SampleResult{Role: string(res.Role), Model: res.Model, StopReason: res.StopReason}
	switch c := res.Content.(type) {
	case mcp.TextContent:
		out.Text = c.Text
	case *mcp.TextContent:
		out.Text = c.Text
	case map[string]any: // decoded from an input response
		if t, ok := c["text"].(string); ok && c["type"] == "text" {
			out.Text = t
			break
		}
		b, _ := json.Marshal(c)
		out.Text = string(b)
	default:
		b, _ := json.Marshal(res.Content)
		out.Text = string(b)
	}
	return out
}

// declared reports whether a 2025 session's client declared a capability
// (has says which); a session that does not tell counts as declaring it.
func declared(ctx context.Context, has func(mcp.ClientCapabilities) bool) bool {
	if ci, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return has(ci.GetClientCapabilities())
	}
	return true
}

// CanElicit reports whether the client declared the elicitation
// capability, where its session says (registry.ElicitCapable); when it
// cannot tell, Elicit gets to answer.
func (p *peer) CanElicit(ctx context.Context) bool {
	if modernInfo(ctx) != nil {
		return p.round != nil && hasCapability(p.round.caps, "elicitation")
	}
	if ci, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return ci.GetClientCapabilities().Elicitation != nil
	}
	return true
}

// hasURLElicitation reports whether caps declare URL-mode elicitation.
func hasURLElicitation(caps *mcp.ClientCapabilities) bool {
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// CanElicitURL reports whether the client declared URL-mode elicitation
// (registry.URLElicitCapable); a session that cannot tell counts as no.
func (p *peer) CanElicitURL(ctx context.Context) bool {
	if modernInfo(ctx) != nil {
		return p.round != nil && hasURLElicitation(p.round.caps)
	}
	if ci, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		caps := ci.GetClientCapabilities()
		return hasURLElicitation(&caps)
	}
	return false
}

func (p *peer) Elicit(ctx context.Context, req registry.ElicitRequest) (*registry.ElicitResult, error) {
	r := mcp.ElicitationRequest{}
	r.Params.Message = req.Message
	if req.URL != "" {
		// URL mode: the client opens the URL; nothing but the action
		// comes back.
		if !p.CanElicitURL(ctx) {
			return nil, &registry.CapabilityError{Capability: "elicitation.url"}
		}
		r.Params.Mode, r.Params.URL, r.Params.ElicitationID = mcp.ElicitationModeURL, req.URL, rand.Text()
	} else {
		var schema any = map[string]any{"type": "object", "properties": map[string]any{}}
		if len(req.Schema) > 0 {
			if err := json.Unmarshal(req.Schema, &schema); err != nil {
				return nil, fmt.Errorf("mcpserver: elicitation schema: %w", err)
			}
		}
		r.Params.RequestedSchema = schema
	}
	if modernInfo(ctx) != nil {
		resp, err := p.askModern("elicitation", req.Key, mcp.NewElicitationInputRequest(r.Params))
		if err != nil {
			return nil, err
		}
		if resp.Elicitation == nil {
			return nil, errors.New("mcpserver: the client's elicitation answer is empty")
		}
		return elicitResult(resp.Elicitation), nil
	}
	if !declared(ctx, func(c mcp.ClientCapabilities) bool { return c.Elicitation != nil }) {
		return nil, &registry.CapabilityError{Capability: "elicitation"} // mcp-go would ask anyway
	}
	res, err := p.s.mcp.RequestElicitation(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: elicitation: %w", err)
	}
	return elicitResult(res), nil
}

func elicitResult(res *mcp.ElicitationResult) *registry.ElicitResult {
	out := &registry.ElicitResult{Action: string(res.Action)}
	if m, ok := res.Content.(map[string]any); ok {
		out.Content = m
	}
	return out
}

// Roots lists the client's roots: an input request on the 2026-07-28
// wire, a roots/list request on 2025 sessions.
func (p *peer) Roots(ctx context.Context) ([]registry.Root, error) {
	var res *mcp.ListRootsResult
	if modernInfo(ctx) != nil {
		resp, err := p.askModern("roots", "", mcp.NewRootsInputRequest())
		if err != nil {
			return nil, err
		}
		res = resp.Roots
	} else {
		var err error
		if res, err = p.s.mcp.RequestRoots(ctx, mcp.ListRootsRequest{Request: mcp.Request{Method: string(mcp.MethodListRoots)}}); err != nil {
			return nil, fmt.Errorf("mcpserver: roots: %w", err)
		}
	}
	if res == nil {
		return nil, errors.New("mcpserver: the client's roots answer is empty")
	}
	out := make([]registry.Root, len(res.Roots))
	for i, r := range res.Roots {
		out[i] = registry.Root{URI: r.URI, Name: r.Name}
	}
	return out, nil
}

// shuttingDown is the result of a call cut at the end of the shutdown
// grace, so the client learns why instead of losing the connection.
const shuttingDown = "server shutting down: the call was still running when the shutdown grace ([server] shutdown_grace) ended"
