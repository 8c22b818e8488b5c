// Package streamhttp serves an mcpserver.Server over streamable HTTP
// (both protocol eras), with mcp-go's StreamableHTTPServer at the end of
// a chain of named middleware: bounds, Host/Origin, CORS, the caller's
// state, bearer auth, profile routing, request limits and shutdown
// tracking, each one link (middleware.go), so a new concern is one more.
package streamhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/ratelimit"
	"github.com/bubbuild/bub-mcp/internal/hostcheck"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/edge"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Token maps a bearer token, known only by its SHA-256, to a principal and
// the profile it may use.
type Token struct {
	Name    string
	SHA256  string // lower-case hex
	Profile string
}

// ConsolePrefix is where Options.Console is mounted: the console
// package's Prefix (which streamhttp does not import).
const ConsolePrefix = "/console"

// Options configure the HTTP transport.
type Options struct {
	// DefaultProfile serves /mcp when no token names a profile.
	DefaultProfile string
	// Profiles are the names /mcp/p/<name> accepts.
	Profiles []string
	// Tokens, when non-empty, make a valid bearer token mandatory.
	Tokens []Token
	// OAuth, when set, also accepts OAuth 2.1 access tokens (an OAuth
	// resource server; RFC 9728 metadata is served at
	// /.well-known/oauth-protected-resource) and makes a token mandatory.
	// Static Tokens are tried first.
	OAuth *auth.ResourceServer
	// RequestLimits, when set, rate-limits requests per principal (the
	// [[limits]] rules without a tool; 429 with Retry-After).
	RequestLimits *ratelimit.Limits
	// CheckHosts enables the Host/Origin check against DNS rebinding;
	// callers turn it on for loopback binds.
	CheckHosts bool
	// AllowedHosts extends the loopback host names the check accepts.
	AllowedHosts []string
	// CORSOrigins are the exact origins ("scheme://host[:port]") whose
	// web pages may call the server from a browser, such as the MCP
	// Inspector's UI: their preflights are answered, their responses
	// carry Access-Control-Allow-Origin, and the Origin check lets them
	// through. Other origins are treated as before (refused on loopback
	// binds; an OPTIONS gets 405). No wildcard: any page could then
	// drive the tools of a server without tokens.
	CORSOrigins []string
	// SessionIdleTTL expires idle 2025-protocol sessions; default 30m.
	SessionIdleTTL time.Duration
	// Metrics, when set, is served at GET /metrics (telemetry's
	// Prometheus exposition). With Tokens set it needs a valid bearer
	// token too: it names the tools and how they are used.
	Metrics http.Handler
	// Health, when set, reports the parts bub-mcp relies on (the
	// upstream servers) for /healthz. bub-mcp itself keeps serving
	// whatever they say, so /healthz answers 200 either way.
	Health func() Health
	// Console, when set, is the operator console's handler, mounted at
	// ConsolePrefix (its pages, assets and event streams are all under
	// it). It checks its own tokens and logins; the Host/Origin check and
	// bounds apply to it as to /mcp.
	Console http.Handler
	// Routes are more handlers, by ServeMux pattern, answered beside
	// /mcp with the Host/Origin check and bounds (the OAuth front's
	// endpoints). A pattern that clashes with the transport's own is a
	// programming error: New panics, as ServeMux does.
	Routes map[string]http.Handler
	// Loopback says the listener binds only loopback interfaces. Without
	// Tokens, /healthz then shows Health's details to any caller (only
	// local users reach it); on other binds they need a valid token.
	Loopback bool
}

// Health is what /healthz reports of the parts bub-mcp relies on.
type Health struct {
	// Degraded is set while a part is failing (an upstream server that
	// does not start); unauthenticated callers learn this and no more.
	Degraded bool
	// Details describe each part (upstream states and last errors). They
	// can hold what a failing process wrote to stderr, secrets included,
	// so only a caller with a valid bearer token sees them (or anyone on
	// a loopback bind without tokens; see Options.Loopback).
	Details []string
}

// modernProtocol is the sessionless protocol version, which removed stream
// resumption.
const modernProtocol = "2026-07-28"

// notificationWait bounds how long a result waits for its notifications.
const notificationWait = time.Second

// getStreamWait bounds how long sampling waits for the client's GET stream.
const getStreamWait = 5 * time.Second

// Handler is the HTTP transport of one mcpserver.Server: /mcp,
// /p/<profile>/mcp and /mcp/p/<profile> speak streamable HTTP (both
// protocol eras); /healthz answers "ok" or "degraded" (and Health's
// details to callers allowed them); /metrics serves Options.Metrics when
// set.
type Handler struct {
	h          http.Handler // the chain
	core       edge.Core
	log        *slog.Logger
	via        edge.ViaMCP
	streamable *server.StreamableHTTPServer
	ids        *sessionTable
	parking    *mcpgofix.Parking // 2025 sessions' GET streams (mcpgofix/getstream.go)
	posts      edge.Calls        // POSTs being answered
}

// New builds srv's HTTP handler.
func New(srv *mcpserver.Server, o Options) *Handler {
	if o.DefaultProfile == "" {
		o.DefaultProfile = "default"
	}
	if o.SessionIdleTTL <= 0 {
		o.SessionIdleTTL = 30 * time.Minute
	}
	core := srv.Transport()
	limits := core.Limits()
	h := &Handler{core: core, log: core.Logger(), via: edge.ViaMCP{MCP: core.MCP(), Logger: core.Logger()},
		ids: newSessionTable(limits.MaxSessions, limits.MaxSessionsPerPrincipal), parking: mcpgofix.NewParking()}
	// However a 2025 session ends (DELETE, idle sweep, shutdown), its GET
	// stream's hand-off state goes with it.
	core.OnSessionEnd(h.parking.Forget)
	h.streamable = server.NewStreamableHTTPServer(core.MCP(),
		server.WithSessionIdManagerResolver(h.ids),
		server.WithSessionIdleTTL(o.SessionIdleTTL),
		// Also Last-Event-ID replay after a reconnect.
		mcpgofix.EventStore(),
		// Host/Origin checks are ours (below), configurable per bind.
		server.WithDisableLocalhostProtection(true),
		server.WithStreamableHTTPLogger(h.log),
	)
	endpoint := http.HandlerFunc(h.serveMCP)
	mcpRoute := func(profileInPath bool) http.Handler {
		return chain(endpoint,
			callerState(h, o.DefaultProfile),
			bearerAuth(o.Tokens, o.OAuth, h.log),
			profileRoute(profileInPath, o.Profiles),
			requestLimits(o.RequestLimits),
			trackAnswers(&h.posts),
		)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpRoute(false))
	mux.Handle("/mcp/p/{profile}", mcpRoute(true))
	// Clients choose the transport from a URL ending in /mcp (the
	// inspector probes others with GET), so profiles are served there too.
	mux.Handle("/p/{profile}/mcp", mcpRoute(true))
	if o.OAuth != nil {
		// RFC 9728 metadata, read before any token exists: no auth.
		meta := o.OAuth.MetadataHandler()
		mux.Handle("GET "+auth.WellKnownPath, meta)
		mux.Handle("GET "+auth.WellKnownPath+"/", meta)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		var hl Health
		if o.Health != nil {
			hl = o.Health()
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if hl.Degraded {
			fmt.Fprintln(w, "degraded")
		} else {
			fmt.Fprintln(w, "ok")
		}
		if !healthDetails(r, o) {
			return
		}
		for _, line := range hl.Details {
			fmt.Fprintln(w, line)
		}
	})
	if o.Metrics != nil {
		mux.Handle("GET /metrics", chain(o.Metrics, requireToken(o.Tokens, o.OAuth, h.log)))
	}
	for pattern, rh := range o.Routes {
		mux.Handle(pattern, rh)
	}
	if o.Console != nil {
		mux.Handle(ConsolePrefix, o.Console)
		mux.Handle(ConsolePrefix+"/", o.Console)
	}
	h.h = chain(mux,
		hostOrigin(o.CheckHosts, o.AllowedHosts, o.CORSOrigins),
		corsFor(o.CORSOrigins),
		bounds(limits, core.Reclaimer()),
	)
	return h
}

// ServeHTTP serves one request through the chain.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// CloseSessions closes the 2025 sessions: their SSE streams would
// otherwise keep connections busy forever.
func (h *Handler) CloseSessions(ctx context.Context) { h.streamable.CloseSessions(ctx) }

// serveMCP is the end of an MCP route's chain: the request's caller is
// known; what mcp-go would mishandle is repaired or refused (mcpgofix),
// POSTs go through servePOST, a 2025 session's GET stream is parked, the
// rest is mcp-go's.
func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request) {
	st := httpRequestFrom(r.Context())
	sid := r.Header.Get("Mcp-Session-Id")
	// A session of the 2025 protocol: streams resume from the event store.
	session := sid != "" && r.Header.Get("Mcp-Protocol-Version") != modernProtocol
	if mcpgofix.StrayCancel(r) {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if r.Method == http.MethodPost {
		h.servePOST(w, r, st, session)
		return
	}
	if mcpgofix.CheckStreamRequest(w, r, h.ids.known) {
		return
	}
	if r.Method == http.MethodGet && session && r.Header.Get("Last-Event-ID") == "" {
		h.parking.ServeGET(h.streamable, w, r, sid)
		return
	}
	h.streamable.ServeHTTP(w, r)
}

// healthDetails reports whether a /healthz caller may see the details:
// with tokens or OAuth configured, one that presents a valid token;
// without, any caller of a loopback bind.
func healthDetails(r *http.Request, o Options) bool {
	if len(o.Tokens) > 0 || o.OAuth != nil {
		if _, ok := authenticate(r, o.Tokens); ok {
			return true
		}
		if o.OAuth == nil || r.Header.Get("Authorization") == "" {
			return false
		}
		_, err := o.OAuth.Authenticate(r.Context(), r)
		return err == nil
	}
	return o.Loopback
}

// IsLoopback reports whether a listen address binds only loopback
// interfaces.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return hostcheck.Loopback(host)
}

// Serve serves h on ln until ctx ends, then shuts down gracefully: stop
// accepting, let in-flight calls finish within grace, then cancel them (the
// handlers' contexts end, which kills their processes).
func (h *Handler) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       h.core.Limits().IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return hard },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	h.log.Info("mcp.http.shutdown", "grace", grace)
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	// Stop accepting now; Shutdown returns once every connection is idle.
	drained := make(chan struct{})
	go func() { _ = srv.Shutdown(graceCtx); close(drained) }()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), edge.ShutdownTimeout)
	defer cancelClose()
	if !h.core.WaitCalls(graceCtx) {
		// Out of time: cut the calls (their processes die) and let each
		// answer "server shutting down" before the connections close.
		h.log.Warn("mcp.http.shutdown.cancelling", "reason", "grace period over")
		h.core.CutCalls()
		h.core.WaitCalls(closeCtx)
	}
	// Let the answers be written before sessions (and their streams) close.
	h.posts.Wait(closeCtx)
	// End the long-lived streams so the last responses can be written and
	// connections go idle.
	h.parking.Shutdown()
	h.CloseSessions(closeCtx)
	select {
	case <-drained:
	case <-graceCtx.Done():
	}
	if graceCtx.Err() != nil {
		// Shutdown gave up at the grace's end; the answers being written
		// now get a little longer. (Checked after the select: once the
		// grace is over, drained is ready too, and a select picking it
		// would close connections whose answers are still being
		// written.)
		_ = srv.Shutdown(closeCtx)
	}
	cancelHard()
	_ = srv.Close()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// writeRPCError answers a request refused before dispatch; both codes
// admit returns are HTTP 400 on the 2026-07-28 wire.
func writeRPCError(w http.ResponseWriter, e *mcp.JSONRPCError) {
	b, err := json.Marshal(e)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// servePOST serves one POST. Its envelope is decoded once, here: what
// mcp-go would misread is refused or repaired before it sees the message
// (a batch, a null or odd id, a large integer id: mcpgofix), extension
// methods are answered, 2026-07-28 calls admitted, an initialize given a
// session slot; the rest is mcp-go's.
func (h *Handler) servePOST(w http.ResponseWriter, r *http.Request, st *httpRequest, session bool) {
	body := bodyBytes(r)
	env, err := edge.ParseEnvelope(body)
	if err != nil {
		if mcpgofix.IsBatch(body) {
			refuse(w, nil, mcpgofix.ErrBatch)
			return
		}
		// Not JSON-RPC: mcp-go answers its parse error.
		h.serveStream(w, r, st, false)
		return
	}
	if mcpgofix.NullID(env.Method, env.ID) {
		refuse(w, nil, mcpgofix.ErrOddID)
		return
	}
	if mcpgofix.NoMethod(env.Method, env.ID, env.Result, env.Error != nil) {
		refuse(w, env.ID, mcpgofix.ErrNoMethod)
		return
	}
	if env.Method != "" && env.HasID() {
		valid, big := mcpgofix.IDKind(env.ID)
		if !valid {
			refuse(w, nil, mcpgofix.ErrOddID)
			return
		}
		if big {
			msg, token, err := mcpgofix.BigID(body, env.ID)
			if err != nil {
				refuse(w, nil, mcpgofix.ErrOddID)
				return
			}
			w = &mcpgofix.RestoreID{ResponseWriter: w, Token: token, ID: env.ID}
			r.Body, r.ContentLength = &readBody{b: msg}, int64(len(msg))
		}
	}
	if f := h.core.Methods().Lookup(env.Method); f != nil && h.serveMethod(w, r, &env, f) {
		return
	}
	if !session && env.Method == string(mcp.MethodToolsCall) && r.Header.Get(mcp.HeaderMethod) == env.Method && h.core.NeedsAdmission(env) {
		if e := h.core.Admit(r.Context(), bodyBytes(r)); e != nil {
			writeRPCError(w, e)
			return
		}
	}
	if mcpgofix.MissingSession(w, r, env.Method, env.Params.Meta.Version) {
		return
	}
	if env.Method == string(mcp.MethodInitialize) {
		// An initialize opens a 2025 session (unless mcp-go finds it of
		// the sessionless era): it needs a slot.
		claim, err := h.ids.reserve(principalOf(r, st.caller.Principal))
		if err != nil {
			refuseSession(w, err)
			return
		}
		defer h.ids.settle(claim)
		st.claim = claim
	}
	h.serveStream(w, r, st, session && env.Method == string(mcp.MethodToolsCall) && h.core.Detachable(env.Params.Name))
}

// serveStream hands a POST to mcp-go through a pollable writer.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, st *httpRequest, detachable bool) {
	h.servePollable(w, r, st, detachable)
	st.pw.finish()
}

// refuse answers a POST refused before dispatch with -32600.
func refuse(w http.ResponseWriter, id json.RawMessage, err error) {
	e := edge.RPCError(id, mcp.INVALID_REQUEST, err.Error())
	writeRPCError(w, &e)
}
