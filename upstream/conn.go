package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// State is where an upstream's connection is in its life.
type State string

// The states of an upstream.
const (
	// StateIdle is a lazy upstream not started yet (its remembered tools
	// are listed).
	StateIdle State = "idle"
	// StateStarting is connecting: spawning, initialize, tools/list.
	StateStarting State = "starting"
	// StateReady is connected with its tools registered.
	StateReady State = "ready"
	// StateBackoff is waiting to retry after a failed start or a crash.
	StateBackoff State = "backoff"
	// StateError is connected, but its tools could not be registered (a
	// name clash); LastError says why.
	StateError State = "error"
	// StateClosed is shut down.
	StateClosed State = "closed"
)

// Restart backoff: doubling from minBackoff to maxBackoff; a connection
// that lived stableAfter starts over at minBackoff.
const (
	minBackoff  = 500 * time.Millisecond
	maxBackoff  = time.Minute
	stableAfter = time.Minute
	// stopGrace is how long a stdio server's process group gets between
	// SIGTERM and SIGKILL.
	stopGrace = 2 * time.Second
	// stderrTail is how much of a stdio server's last stderr an error
	// message quotes.
	stderrTail = 2048
	// maxToolPages and maxTools bound what tools/list may bring.
	maxToolPages = 100
	maxTools     = 5000
)

// upstream is one configured server and its connection, restarted with
// backoff for as long as the module lives.
type upstream struct {
	cfg *Server
	m   *Module
	// ctx is the module's, ended early when a hot reload removes or
	// replaces the server (cancel).
	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the run loop has returned

	mu       sync.Mutex
	state    State
	lastErr  string
	since    time.Time
	cur      *session
	changed  chan struct{} // closed and replaced on every state change
	running  bool          // the run loop was started
	closed   bool
	restarts int
	names    []string // runtime names registered
	digest   string   // of the tool list registered
	firstTry chan struct{}

	loadMu sync.Mutex // one tool-list load at a time

	// env is the Environment stdio servers are spawned in, made on first
	// start (envDir is a workspace made for it), closed by Cleanup.
	envMu  sync.Mutex
	env    environment.Environment
	envDir string

	// refresh coalesces notifications/tools/list_changed: one reload in
	// flight per upstream, and at most one more pending behind it, however
	// many notifications arrive meanwhile (a burst would otherwise be a
	// burst of tools/list requests).
	refresh refresher
	// catalog is the server's resources, templates and prompts
	// (resources.go).
	catalog catalog

	seq   atomic.Int64
	calls sync.Map // int64 → *inflight
	// active counts the calls in flight, so a reload that retires the
	// server waits for them without polling.
	active activeCalls

	// pool is an auth = "oauth" or "token_exchange" server's
	// per-principal connections (oauthconn.go); such a server has no
	// shared one.
	pool connPool
	// exchange is an auth = "token_exchange" server's exchanged tokens
	// (tokenexchange.go).
	exchange exchangeCache
	// listing is set while a caller's connection lists the tools of an
	// auth = "token_exchange" server (listForCaller).
	listing atomic.Bool
}

// activeCalls counts calls in flight and says when there are none.
type activeCalls struct {
	mu   sync.Mutex
	n    int
	none chan struct{} // closed while n is 0; nil before the first call
}

func (a *activeCalls) add() {
	a.mu.Lock()
	if a.n == 0 {
		a.none = make(chan struct{})
	}
	a.n++
	a.mu.Unlock()
}

func (a *activeCalls) done() {
	a.mu.Lock()
	if a.n--; a.n == 0 {
		close(a.none)
	}
	a.mu.Unlock()
}

// idle is closed once no call is in flight (at once if none is now).
func (a *activeCalls) idle() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == 0 {
		return closedChan
	}
	return a.none
}

// closedChan is a closed channel, never reopened.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// inflight is a call being served, which notifications and requests from
// the upstream are routed to.
type inflight struct {
	ctx   context.Context // the caller's: it reaches the caller's client
	tc    *registry.ToolContext
	sess  *session // the connection the call went over
	token string
	seq   int64
}

// session is one live connection.
type session struct {
	c    *client.Client
	proc environment.Process // stdio only
	// ctx ends with the session; writes to a stdio server's stdin give
	// up then.
	ctx    context.Context
	cancel context.CancelFunc
	dead   chan struct{}
	once   sync.Once
	err    error // why it ended, set before dead closes
	stderr *tailBuffer
}

// end marks the session lost with err (the first reason wins).
func (s *session) end(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.dead)
		if s.cancel != nil {
			s.cancel()
		}
	})
}

func (s *session) alive() bool {
	select {
	case <-s.dead:
		return false
	default:
		return true
	}
}

func newUpstream(cfg *Server, m *Module) *upstream {
	u := &upstream{cfg: cfg, m: m, state: StateIdle, since: time.Now(), changed: make(chan struct{}), firstTry: make(chan struct{}), stopped: make(chan struct{})}
	parent := m.ctx
	if parent == nil {
		parent = context.Background()
	}
	u.ctx, u.cancel = context.WithCancel(parent)
	return u
}

// setState records a state and wakes everyone waiting for a change.
func (u *upstream) setState(st State, err error) {
	u.mu.Lock()
	u.setStateLocked(st, err)
	u.mu.Unlock()
}

func (u *upstream) setStateLocked(st State, err error) {
	if u.closed && st != StateClosed {
		return
	}
	u.state, u.since = st, time.Now()
	if err != nil {
		u.lastErr = err.Error()
	}
	close(u.changed)
	u.changed = make(chan struct{})
}

// start runs the connection loop once; later calls do nothing.
func (u *upstream) start() {
	u.mu.Lock()
	defer u.mu.Unlock()
	// An auth = "oauth" or "token_exchange" server connects per
	// principal, on their calls.
	if u.running || u.closed || u.cfg.perPrincipal() {
		return
	}
	u.running = true
	u.setStateLocked(StateStarting, nil) // at once: Wait and the status see it starting
	u.m.wg.Add(1)
	go func() {
		defer u.m.wg.Done()
		defer close(u.stopped)
		u.run(u.ctx)
	}()
}

// waitStopped waits for the run loop of a started upstream to return.
func (u *upstream) waitStopped() { <-u.stopped }

// run connects, serves until the connection is lost, and reconnects with
// backoff, until ctx ends.
func (u *upstream) run(ctx context.Context) {
	backoff := minBackoff
	first := true
	var prevErr string
	for {
		u.setState(StateStarting, nil)
		s, err := u.connect(ctx)
		if err == nil {
			err = u.load(ctx, s)
		}
		err = hideURL(err, u.cfg.URL)
		stopping := ctx.Err() != nil
		if s != nil && (stopping || err != nil) {
			u.stop(s)
		}
		if err != nil && !stopping {
			u.setState(StateBackoff, err)
		}
		if first {
			// After the state: whoever waited for the first try (Wait,
			// `bub-mcp upstreams`) reads its outcome, not "starting".
			close(u.firstTry)
			first = false
		}
		if stopping {
			return
		}
		if err != nil {
			// The same failure again is news only at debug level.
			level := slog.LevelWarn
			if err.Error() == prevErr {
				level = slog.LevelDebug
			}
			prevErr = err.Error()
			u.m.log.Log(ctx, level, "upstream.start.failed", "upstream", u.cfg.name, "error", err, "retry_in", backoff)
		} else {
			began := time.Now()
			select {
			case <-s.dead:
			case <-ctx.Done():
				u.stop(s)
				return
			}
			u.stop(s)
			u.mu.Lock()
			u.cur = nil
			u.restarts++
			u.setStateLocked(StateBackoff, s.err)
			u.mu.Unlock()
			prevErr = ""
			u.m.log.Warn("upstream.lost", "upstream", u.cfg.name, "error", s.err, "retry_in", backoff)
			if time.Since(began) > stableAfter {
				backoff = minBackoff
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// connect starts a session: the transport, initialize, within
// start_timeout.
func (u *upstream) connect(ctx context.Context) (*session, error) {
	return u.connectWith(ctx, nil, nil)
}

// connectWith is connect, with oauth (for an auth = "oauth" server: one
// principal's token store and client) instead of a static bearer token,
// and hc (nil: u.httpClient()) as the HTTP client of an HTTP server.
func (u *upstream) connectWith(ctx context.Context, oauth *transport.OAuthConfig, hc *http.Client) (*session, error) {
	s := &session{dead: make(chan struct{})}
	var tr transport.Interface
	if u.cfg.URL != "" {
		h := map[string]string{}
		for k, v := range u.cfg.Headers {
			h[k] = v
		}
		if env := u.cfg.BearerTokenEnv; env != "" {
			tok := u.m.app.Getenv(env)
			if tok == "" {
				return nil, fmt.Errorf("bearer_token_env: $%s is empty or unset", env)
			}
			h["Authorization"] = "Bearer " + tok
		}
		if hc == nil {
			hc = u.httpClient()
		}
		if u.cfg.kind() == "sse" {
			// The 2024 HTTP+SSE transport: answers come on the event
			// stream, so its wait for one is the call's timeout.
			t, err := transport.NewSSE(u.cfg.URL, transport.WithHeaders(h), transport.WithHTTPClient(hc),
				transport.WithResponseTimeout(u.cfg.Timeout.Duration), transport.WithSSELogger(u.m.log.With("upstream", u.cfg.name)))
			if err != nil {
				return nil, err
			}
			tr = t
		} else {
			//lint:ignore SA1019 the 2025 session protocol on purpose: its GET stream carries list_changed and the server's requests
			opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(h), transport.WithContinuousListening(), transport.WithHTTPBasicClient(hc),
				transport.WithHTTPLogger(u.m.log.With("upstream", u.cfg.name))}
			if oauth != nil {
				opts = append(opts, transport.WithHTTPOAuth(*oauth))
			}
			t, err := transport.NewStreamableHTTP(u.cfg.URL, opts...)
			if err != nil {
				return nil, err
			}
			tr = t
		}
	} else {
		t, err := u.spawn(ctx, s)
		if err != nil {
			return nil, err
		}
		tr = t
	}
	s.c = client.NewClient(tr,
		client.WithSamplingHandler(samplingHandler{u, s}),
		client.WithElicitationHandler(elicitationHandler{u, s}),
		// The 2025 session protocol: what today's servers speak, with
		// server-to-client requests (sampling, elicitation) on the
		// connection; a 2026 probe would stall old stdio servers.
		client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	s.c.OnNotification(func(n mcp.JSONRPCNotification) { u.notification(s, n) })
	// The client keeps Start's ctx for the server's requests: the
	// module's, not the start timeout's.
	if err := s.c.Start(ctx); err != nil {
		s.end(err)
		return s, fmt.Errorf("start: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "bub-mcp", Version: u.m.version}
	if _, err := s.c.Initialize(ictx, req); err != nil {
		return s, u.startError("initialize", s, ictx, err)
	}
	return s, nil
}

// startError explains a failed start, with the server's last stderr.
func (u *upstream) startError(stage string, s *session, ctx context.Context, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("no answer within start_timeout (%s)", u.cfg.StartTimeout.Duration)
	}
	select {
	case <-s.dead:
		if s.err != nil {
			err = s.err
		}
	case <-time.After(50 * time.Millisecond): // a crash's exit status is a better reason
		if !s.alive() && s.err != nil {
			err = s.err
		}
	}
	return fmt.Errorf("%s: %w", stage, err)
}

// stop ends a session: the client closes, and a stdio server's whole
// tree is ended (stopProcess).
func (u *upstream) stop(s *session) {
	if s.c != nil {
		if err := s.c.Close(); err != nil {
			u.m.log.Debug("upstream.close", "upstream", u.cfg.name, "error", err)
		}
	}
	if s.proc == nil {
		s.end(errors.New("closed"))
		return
	}
	u.stopProcess(s)
}

// listTools reads the whole tools/list as raw JSON, so schemas pass
// through byte for byte.
func listTools(ctx context.Context, s *session, seq *atomic.Int64) ([]json.RawMessage, error) {
	var out []json.RawMessage
	cursor := ""
	for range maxToolPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		id := mcp.NewRequestId("bub-tools-" + strconv.FormatInt(seq.Add(1), 10))
		resp, err := s.c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: string(mcp.MethodToolsList), Params: params})
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, resp.Error.AsError()
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &page); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		out = append(out, page.Tools...)
		if len(out) > maxTools {
			return nil, fmt.Errorf("tools/list: more than %d tools", maxTools)
		}
		if page.NextCursor == "" || page.NextCursor == cursor {
			return out, nil
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxToolPages)
}

// load lists the session's tools and registers them; on success the
// session becomes current.
func (u *upstream) load(ctx context.Context, s *session) error {
	lctx, cancel := context.WithTimeout(ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	raws, err := listTools(lctx, s, &u.seq)
	if err != nil {
		return u.startError("tools/list", s, lctx, err)
	}
	if err := u.register(raws); err != nil {
		// Connected, but nothing to offer until the list changes.
		u.mu.Lock()
		u.cur = s
		u.setStateLocked(StateError, err)
		u.mu.Unlock()
		u.m.log.Error("upstream.tools.refused", "upstream", u.cfg.name, "error", err)
		u.catalogChanged(s)
		return nil
	}
	u.m.remember(u.cfg, raws)
	u.mu.Lock()
	u.cur = s
	u.setStateLocked(StateReady, nil)
	u.mu.Unlock()
	u.catalogChanged(s)
	return nil
}

// refresher coalesces reloads of a list (tools, or resources and
// prompts): idle, running, or running with another one asked for
// (pending). The pending session is the latest notifier's, so the reload
// that follows reads the newest connection.
type refresher struct {
	mu      sync.Mutex
	running bool
	pending *session
}

// ask runs run(s) now, or, while a run is going, marks one more to follow
// it: one at a time and at most one pending, however many ask meanwhile
// (a burst of list_changed would otherwise be a burst of lists). The runs
// are tracked by wg, so Cleanup waits for them; stopped ends the chain.
func (r *refresher) ask(s *session, wg *sync.WaitGroup, stopped func() bool, run func(*session)) {
	r.mu.Lock()
	if r.running {
		r.pending = s
		r.mu.Unlock()
		return
	}
	r.running = true
	r.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			run(s)
			r.mu.Lock()
			next := r.pending
			r.pending = nil
			if next == nil || stopped() {
				r.running = false
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
			s = next
		}
	}()
}

// listChanged asks for a reload of s's tool list.
func (u *upstream) listChanged(s *session) {
	u.refresh.ask(s, &u.m.wg, u.m.stopping, u.reload)
}

// reload re-reads the tool list after notifications/tools/list_changed.
func (u *upstream) reload(s *session) {
	ctx, cancel := context.WithTimeout(u.m.ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	raws, err := listTools(ctx, s, &u.seq)
	if err != nil {
		if u.m.ctx.Err() == nil && s.alive() { // not just shutting down
			u.m.log.Warn("upstream.tools.reload", "upstream", u.cfg.name, "error", err)
		}
		return
	}
	err = u.register(raws)
	u.mu.Lock()
	if u.cur == s {
		if err != nil {
			u.setStateLocked(StateError, err)
		} else {
			u.setStateLocked(StateReady, nil)
		}
	}
	u.mu.Unlock()
	if err != nil {
		u.m.log.Error("upstream.tools.refused", "upstream", u.cfg.name, "error", err)
		return
	}
	u.m.remember(u.cfg, raws)
}

// register turns a tool list into registry tools and swaps them in for
// the previous ones; an unchanged list changes nothing.
func (u *upstream) register(raws []json.RawMessage) error {
	u.loadMu.Lock()
	defer u.loadMu.Unlock()
	raws = u.admit(raws) // pin.go: quarantined tools are left out
	digest := digestOf(raws)
	u.mu.Lock()
	if u.closed { // retired by a reload: its tools are gone for good
		u.mu.Unlock()
		return nil
	}
	same := digest == u.digest
	old := append([]string(nil), u.names...)
	u.mu.Unlock()
	if same {
		return nil
	}
	tools, err := u.tools(raws)
	if err != nil {
		return err
	}
	if err := u.m.app.UpdateTools(old, tools); err != nil {
		return err
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	u.mu.Lock()
	u.names, u.digest = names, digest
	u.mu.Unlock()
	u.m.log.Info("upstream.tools", "upstream", u.cfg.name, "tools", len(tools))
	return nil
}

// tools builds the registry tools of a tool list, after the server's
// tools and deny globs. Two upstream tools with one name are an error
// naming both.
func (u *upstream) tools(raws []json.RawMessage) ([]*registry.Tool, error) {
	owner := map[string]string{}
	overridden := map[string]bool{} // listed tools, for overrides naming none
	var out []*registry.Tool
	for _, raw := range raws {
		d, err := parseDefinition(raw)
		if err != nil {
			u.m.log.Warn("upstream.tool.skipped", "upstream", u.cfg.name, "error", err)
			continue
		}
		name := RuntimeName(u.cfg.name, d.tool.Name)
		if !u.cfg.allowed(d.tool.Name, name) {
			continue
		}
		ov := u.cfg.Overrides[d.tool.Name]
		overridden[d.tool.Name] = true
		if ov != nil && ov.Name != "" {
			name = RuntimeName(u.cfg.name, ov.Name)
		}
		key := strings.ToLower(name)
		if prev, dup := owner[key]; dup {
			return nil, fmt.Errorf("upstream %s: tools %q and %q both map to %s (deny one in [upstreams.%s])", u.cfg.name, prev, d.tool.Name, name, u.cfg.name)
		}
		owner[key] = d.tool.Name
		t, err := u.tool(name, d, ov)
		if err != nil {
			u.m.log.Warn("upstream.tool.skipped", "upstream", u.cfg.name, "tool", d.tool.Name, "error", err)
			continue
		}
		out = append(out, t)
	}
	for _, tool := range sortedKeys(u.cfg.Overrides) {
		if !overridden[tool] {
			u.m.log.Warn("upstream.override.unknown", "upstream", u.cfg.name, "tool", tool,
				"why", "the server lists no such tool (or its tools/deny globs leave it out); the override applies if it comes")
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// tool makes the registry tool that calls one upstream tool, with its
// override (nil for none) applied: the upstream is still called by its
// own name, with the fixed arguments added.
func (u *upstream) tool(name string, d definition, ov *Override) (*registry.Tool, error) {
	upstreamName := d.tool.Name
	d, err := ov.apply(d)
	if err != nil {
		return nil, fmt.Errorf("override: %w", err)
	}
	d.tool.Meta = exposedToolMeta(u.cfg.name, d.tool.Meta)
	h := func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		args, err := ov.withFixed(args)
		if err != nil {
			return nil, err
		}
		return u.call(ctx, tc, upstreamName, args)
	}
	t, err := registry.NewRawTool(name, d.tool.Description, d.input, h,
		registry.WithOutputSchema(d.output),
		registry.WithAnnotations(annotations(d.tool.Annotations, d.tool.Title)))
	if err != nil {
		return nil, err
	}
	t.Source = d
	t.Deferred = u.cfg.Defer
	t.Renderer = func(v any) (string, error) {
		if r, ok := v.(*Result); ok {
			return r.text, nil
		}
		return registry.Render(nil, v)
	}
	return t, nil
}

// close ends the upstream for good.
func (u *upstream) close() {
	u.mu.Lock()
	u.closed = true
	u.setStateLocked(StateClosed, nil)
	u.mu.Unlock()
	// No new per-principal connection; the live ones serve their calls
	// in flight and close when u.ctx ends (the reaper), as the shared
	// connection's run loop does.
	u.pool.shut()
}

// hideURL keeps an HTTP upstream's URL out of an error: its query or path
// may hold a token (or a ${VAR} expanded from a secret), and the error
// becomes the upstream's last error, which tool errors, status, /healthz
// and logs show. net/http's errors quote the request URL (Post "…"), and
// mcp-go passes them on; only scheme://host is kept.
func hideURL(err error, configured string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) && ue.URL != "" {
		msg = strings.ReplaceAll(msg, ue.URL, urlOrigin(ue.URL))
	}
	if configured != "" {
		msg = strings.ReplaceAll(msg, configured, urlOrigin(configured))
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// redactedError is an error with its text cut (hideURL); callers may
// still match what it wraps.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// urlOrigin is raw's scheme://host, or "(url)" when raw does not parse.
func urlOrigin(raw string) string {
	p, err := url.Parse(raw)
	if err != nil || p.Host == "" {
		return "(url)"
	}
	return p.Scheme + "://" + p.Host
}
