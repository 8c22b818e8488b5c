package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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

	seq   atomic.Int64
	calls sync.Map // int64 → *inflight
}

// inflight is a call being served, which notifications and requests from
// the upstream are routed to.
type inflight struct {
	ctx   context.Context // the caller's: it reaches the caller's client
	tc    *registry.ToolContext
	token string
	seq   int64
}

// session is one live connection.
type session struct {
	c      *client.Client
	cmd    *exec.Cmd // stdio only
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
	u := &upstream{cfg: cfg, m: m, state: StateIdle, since: time.Now(), changed: make(chan struct{}), firstTry: make(chan struct{})}
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
	if u.running || u.closed {
		return
	}
	u.running = true
	u.m.wg.Add(1)
	go func() {
		defer u.m.wg.Done()
		u.run(u.m.ctx)
	}()
}

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
		if first {
			close(u.firstTry)
			first = false
		}
		if ctx.Err() != nil {
			if s != nil {
				u.stop(s)
			}
			return
		}
		if err != nil {
			if s != nil {
				u.stop(s)
			}
			u.setState(StateBackoff, err)
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
		hc := &http.Client{Transport: &boundedBodies{next: http.DefaultTransport, max: u.cfg.MaxMessageBytes, key: "upstreams." + u.cfg.name + ".max_message_bytes"}}
		//lint:ignore SA1019 the 2025 session protocol on purpose: its GET stream carries list_changed and the server's requests
		t, err := transport.NewStreamableHTTP(u.cfg.URL, transport.WithHTTPHeaders(h), transport.WithContinuousListening(), transport.WithHTTPBasicClient(hc),
			transport.WithHTTPLogger(u.m.log.With("upstream", u.cfg.name)))
		if err != nil {
			return nil, err
		}
		tr = t
	} else {
		t, err := u.spawn(s)
		if err != nil {
			return nil, err
		}
		tr = t
	}
	s.c = client.NewClient(tr,
		client.WithSamplingHandler(samplingHandler{u}),
		client.WithElicitationHandler(elicitationHandler{u}),
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

// spawn starts a stdio server in its own process group, so that closing
// it ends every process it started.
func (u *upstream) spawn(s *session) (transport.Interface, error) {
	cmd := exec.Command(u.cfg.Command, u.cfg.Args...)
	cmd.Env = os.Environ()
	for k, v := range u.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = u.cfg.Cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	s.cmd = cmd
	s.stderr = &tailBuffer{max: stderrTail}
	log := u.m.log.With("upstream", u.cfg.name)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		s.stderr.drain(stderr, log)
	}()
	go func() {
		<-drained // the exit message quotes all the stderr there was
		err := cmd.Wait()
		msg := "exited"
		if err != nil {
			msg = "exited: " + err.Error()
		}
		if tail := strings.TrimSpace(s.stderr.String()); tail != "" {
			msg += "; stderr: " + tail
		}
		s.end(errors.New(msg))
	}()
	limited := &lineLimit{r: stdout, max: u.cfg.MaxMessageBytes, over: func(n int64) {
		s.end(fmt.Errorf("sent a message over upstreams.%s.max_message_bytes (%d bytes)", u.cfg.name, n))
	}}
	return transport.NewIO(limited, stdin, nil), nil
}

// errMessageTooLong ends a stream whose message passed its bound.
var errMessageTooLong = errors.New("message too long")

// lineLimit fails a stdio stream once one line passes max bytes: the
// transport would otherwise read it whole into memory.
type lineLimit struct {
	r    io.Reader
	max  int64
	n    int64 // bytes of the current line so far
	over func(n int64)
}

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		if last := bytes.LastIndexByte(p[:n], '\n'); last < 0 {
			l.n += int64(n)
		} else {
			// The line the first newline ends began in an earlier read.
			if first := bytes.IndexByte(p[:n], '\n'); l.n+int64(first) > l.max {
				l.n += int64(first)
			} else {
				l.n = int64(n - 1 - last)
			}
		}
		if l.n > l.max {
			l.over(l.n)
			return 0, errMessageTooLong
		}
	}
	return n, err
}

// boundedBodies caps the response bodies of an HTTP upstream's calls; the
// standalone GET stream, which lives as long as the session, is not
// capped.
type boundedBodies struct {
	next http.RoundTripper
	max  int64
	key  string
}

func (b *boundedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost {
		return resp, err
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: b.max, key: b.key, max: b.max}
	return resp, nil
}

type cappedBody struct {
	io.ReadCloser
	left, max int64
	key       string
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1] // one byte past the cap tells a body of exactly max from a longer one
	}
	n, err := c.ReadCloser.Read(p)
	if c.left -= int64(n); c.left < 0 {
		return 0, fmt.Errorf("response over %s (%d bytes)", c.key, c.max)
	}
	return n, err
}

// stop ends a session: the client closes, and a stdio server's whole
// process group gets SIGTERM, then SIGKILL after stopGrace.
func (u *upstream) stop(s *session) {
	if s.c != nil {
		if err := s.c.Close(); err != nil {
			u.m.log.Debug("upstream.close", "upstream", u.cfg.name, "error", err)
		}
	}
	if s.cmd == nil {
		s.end(errors.New("closed"))
		return
	}
	pgid := s.cmd.Process.Pid
	if s.alive() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-s.dead:
		case <-time.After(stopGrace):
		}
	}
	// The leader may be gone while its children live on: end the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.dead
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
		return nil
	}
	u.m.remember(u.cfg, raws)
	u.mu.Lock()
	u.cur = s
	u.setStateLocked(StateReady, nil)
	u.mu.Unlock()
	return nil
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
	digest := digestOf(raws)
	u.mu.Lock()
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
		key := strings.ToLower(name)
		if prev, dup := owner[key]; dup {
			return nil, fmt.Errorf("upstream %s: tools %q and %q both map to %s (deny one in [upstreams.%s])", u.cfg.name, prev, d.tool.Name, name, u.cfg.name)
		}
		owner[key] = d.tool.Name
		t, err := u.tool(name, d)
		if err != nil {
			u.m.log.Warn("upstream.tool.skipped", "upstream", u.cfg.name, "tool", d.tool.Name, "error", err)
			continue
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// tool makes the registry tool that calls one upstream tool.
func (u *upstream) tool(name string, d definition) (*registry.Tool, error) {
	upstreamName := d.tool.Name
	h := func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
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
			return renderResult(r.r), nil
		}
		return registry.Render(nil, v)
	}
	return t, nil
}

// errCallTimeout is the cause of a call that ran past its timeout.
var errCallTimeout = errors.New("upstream call timed out")

// call runs one upstream tool for a caller.
func (u *upstream) call(ctx context.Context, tc *registry.ToolContext, tool string, args json.RawMessage) (any, error) {
	s, err := u.session(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeoutCause(ctx, u.cfg.Timeout.Duration, errCallTimeout)
	defer cancel()
	f := &inflight{ctx: cctx, tc: tc, seq: u.seq.Add(1)}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := map[string]any{"name": tool, "arguments": args}
	if tc != nil && tc.Peer != nil {
		f.token = "bub-" + strconv.FormatInt(f.seq, 10)
		params["_meta"] = map[string]any{"progressToken": f.token}
	}
	u.calls.Store(f.seq, f)
	defer u.calls.Delete(f.seq)
	// The transport, not Client.CallTool: the request id is ours, so a
	// cancelled call can be named in notifications/cancelled on both
	// transports (mcp-go's client sends it on stdio only).
	id := mcp.NewRequestId("bub-call-" + strconv.FormatInt(f.seq, 10))
	resp, err := s.c.GetTransport().SendRequest(cctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: string(mcp.MethodToolsCall), Params: params})
	if err != nil && cctx.Err() != nil && s.alive() {
		u.cancelUpstream(s, id, context.Cause(cctx))
	}
	var res *mcp.CallToolResult
	if err == nil {
		if resp.Error != nil {
			err = resp.Error.AsError()
		} else {
			res, err = mcp.ParseCallToolResult(&resp.Result)
		}
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err() // the caller cancelled; the executor says so
		case context.Cause(cctx) == errCallTimeout:
			return nil, &registry.Error{Kind: registry.KindTemporary,
				Message: fmt.Sprintf("Tool '%s' of upstream %s timed out after %s (upstreams.%s.timeout); it was cancelled", tool, u.cfg.name, u.cfg.Timeout.Duration, u.cfg.name)}
		}
		if !s.alive() || u.lostDuring(s, err) {
			return nil, &registry.Error{Kind: registry.KindTemporary,
				Message: fmt.Sprintf("upstream %s went away during the call of '%s' (%v); it is being restarted, and the call may or may not have taken effect", u.cfg.name, tool, s.reason()),
				Cause:   err}
		}
		return nil, &registry.Error{Kind: registry.KindTool, Message: fmt.Sprintf("upstream %s: tool '%s': %v", u.cfg.name, tool, err), Cause: err}
	}
	if res.IsError {
		return nil, &registry.Error{Kind: registry.KindTool, Message: errorText(res), Cause: &toolError{res}}
	}
	return &Result{r: res}, nil
}

// pid is a stdio session's process id (and process group), 0 otherwise.
func (s *session) pid() int {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// cancelUpstream tells the upstream to stop a request whose caller went
// away or whose time ran out; best effort, off the caller's path.
func (u *upstream) cancelUpstream(s *session, id mcp.RequestId, cause error) {
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: string(mcp.MethodNotificationCancelled),
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": cause.Error()}},
	}}
	u.m.wg.Add(1)
	go func() {
		defer u.m.wg.Done()
		ctx, cancel := context.WithTimeout(u.m.ctx, 5*time.Second)
		defer cancel()
		if err := s.c.GetTransport().SendNotification(ctx, n); err != nil {
			u.m.log.Debug("upstream.cancel", "upstream", u.cfg.name, "error", err)
		}
	}()
}

// reason is why a session ended, for messages.
func (s *session) reason() error {
	select {
	case <-s.dead:
		if s.err != nil {
			return s.err
		}
	case <-time.After(100 * time.Millisecond): // the exit status follows the closed pipe closely
	}
	return errors.New("connection lost")
}

// lostDuring reports whether a call's transport error means the session
// is gone: a stdio server's closed pipe, or an HTTP server that no longer
// answers a ping. Then the session is ended, so the loop restarts it.
func (u *upstream) lostDuring(s *session, err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) && !errors.Is(err, transport.ErrTransportClosed) {
		return false
	}
	if s.cmd != nil {
		if errors.Is(err, transport.ErrTransportClosed) {
			<-s.dead // the pipe closed: the process is gone or going
			return true
		}
		return false
	}
	pctx, cancel := context.WithTimeout(u.m.ctx, 5*time.Second)
	defer cancel()
	//lint:ignore SA1019 the connection is on the 2025 protocol, where ping is how liveness is asked
	if perr := s.c.Ping(pctx); perr != nil {
		s.end(fmt.Errorf("no answer from %s: %w", u.cfg.URL, perr))
		return true
	}
	return false
}

// session returns the live session, starting a lazy upstream, waiting at
// most start_timeout for one that is (re)starting.
func (u *upstream) session(ctx context.Context) (*session, error) {
	u.start()
	timer := time.NewTimer(u.cfg.StartTimeout.Duration)
	defer timer.Stop()
	for {
		u.mu.Lock()
		s, st, lastErr, ch, closed := u.cur, u.state, u.lastErr, u.changed, u.closed
		u.mu.Unlock()
		if closed {
			return nil, &registry.Error{Kind: registry.KindTemporary, Message: fmt.Sprintf("upstream %s is shut down", u.cfg.name)}
		}
		if s != nil && s.alive() {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			msg := fmt.Sprintf("upstream %s is not connected (state %s", u.cfg.name, st)
			if lastErr != "" {
				msg += ", last error: " + lastErr
			}
			return nil, &registry.Error{Kind: registry.KindTemporary, Message: msg + "); it is retried with backoff, see `bub-mcp upstreams`"}
		}
	}
}

// close ends the upstream for good.
func (u *upstream) close() {
	u.mu.Lock()
	u.closed = true
	u.setStateLocked(StateClosed, nil)
	u.mu.Unlock()
}

// soleCaller is the call that a request or log record from the upstream
// belongs to: the only one in flight, or the latest when every call in
// flight belongs to one run (the calls one run_code gathers share the
// caller's run id and client); otherwise nil, since the stdio and 2025
// wires do not say which call a server's request is for, and answering
// for another client would leak across clients.
func (u *upstream) soleCaller() *inflight {
	var latest *inflight
	ambiguous := false
	u.calls.Range(func(_, v any) bool {
		f := v.(*inflight)
		if latest != nil && !sameClient(latest.tc, f.tc) {
			ambiguous = true
			return false
		}
		if latest == nil || f.seq > latest.seq {
			latest = f
		}
		return true
	})
	if ambiguous {
		return nil
	}
	return latest
}

func sameClient(a, b *registry.ToolContext) bool {
	if a == nil || b == nil || a.Conn == nil || b.Conn == nil || a.RunID == "" {
		return false
	}
	return a.RunID == b.RunID && *a.Conn == *b.Conn
}

// notification routes what the upstream sends: list changes reload its
// tools; progress goes to the call that asked for it; log records to the
// calling client when that is unambiguous, else to our log.
func (u *upstream) notification(s *session, n mcp.JSONRPCNotification) {
	if u.m.ctx.Err() != nil {
		return // shutting down
	}
	p := n.Params.AdditionalFields
	switch n.Method {
	case string(mcp.MethodNotificationToolsListChanged):
		// Tracked, so Cleanup waits for it; the run loop holds the count
		// above zero while the session lives.
		u.m.wg.Add(1)
		go func() {
			defer u.m.wg.Done()
			u.reload(s)
		}()
	case string(mcp.MethodNotificationProgress):
		tok := fmt.Sprint(p["progressToken"])
		u.calls.Range(func(_, v any) bool {
			f := v.(*inflight)
			if f.token != tok {
				return true
			}
			progress, _ := p["progress"].(float64)
			total, _ := p["total"].(float64)
			msg, _ := p["message"].(string)
			f.tc.Progress(f.ctx, progress, total, msg)
			return false
		})
	case "notifications/message":
		level, _ := p["level"].(string)
		logger, _ := p["logger"].(string)
		name := u.cfg.name
		if logger != "" {
			name += "/" + logger
		}
		if f := u.soleCaller(); f != nil {
			f.tc.Log(f.ctx, slogLevel(level), name, p["data"])
			return
		}
		u.m.log.Log(context.Background(), slogLevel(level), "upstream.log", "upstream", name, "data", p["data"])
	}
}

// slogLevel maps MCP's syslog levels onto slog's, as mcpserver maps back.
func slogLevel(l string) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "info":
		return slog.LevelInfo
	case "notice":
		return slog.LevelInfo + 2
	case "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default: // critical, alert, emergency
		return slog.LevelError + 4
	}
}

// samplingHandler forwards the upstream's sampling requests to the
// client whose call is in flight.
type samplingHandler struct{ u *upstream }

func (h samplingHandler) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	f := h.u.soleCaller()
	if f == nil {
		return nil, fmt.Errorf("bub-mcp: sampling from upstream %s cannot be forwarded: no single client's call is in flight", h.u.cfg.name)
	}
	sr := registry.SampleRequest{SystemPrompt: req.SystemPrompt, MaxTokens: req.MaxTokens}
	for i, m := range req.Messages {
		t, ok := mcp.AsTextContent(m.Content)
		if !ok {
			return nil, fmt.Errorf("bub-mcp: sampling message %d is not text; only text messages are forwarded", i)
		}
		sr.Messages = append(sr.Messages, registry.SampleMessage{Role: string(m.Role), Text: t.Text})
	}
	res, err := f.tc.Sample(f.ctx, sr)
	if err != nil {
		return nil, fmt.Errorf("bub-mcp: the calling client could not sample: %w", err)
	}
	out := &mcp.CreateMessageResult{Model: res.Model, StopReason: res.StopReason}
	out.Role = mcp.Role(res.Role)
	out.Content = mcp.NewTextContent(res.Text)
	return out, nil
}

// elicitationHandler forwards the upstream's elicitation requests to the
// client whose call is in flight.
type elicitationHandler struct{ u *upstream }

func (h elicitationHandler) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	f := h.u.soleCaller()
	if f == nil {
		return nil, fmt.Errorf("bub-mcp: elicitation from upstream %s cannot be forwarded: no single client's call is in flight", h.u.cfg.name)
	}
	if req.Params.Mode == mcp.ElicitationModeURL {
		return nil, fmt.Errorf("bub-mcp: URL-mode elicitation is not forwarded")
	}
	var schema json.RawMessage
	if req.Params.RequestedSchema != nil {
		b, err := json.Marshal(req.Params.RequestedSchema)
		if err != nil {
			return nil, fmt.Errorf("bub-mcp: elicitation schema: %w", err)
		}
		schema = b
	}
	res, err := f.tc.Elicit(f.ctx, registry.ElicitRequest{Message: req.Params.Message, Schema: schema})
	if err != nil {
		return nil, fmt.Errorf("bub-mcp: the calling client could not answer the elicitation: %w", err)
	}
	out := &mcp.ElicitationResult{}
	out.Action = mcp.ElicitationResponseAction(res.Action)
	if res.Content != nil {
		out.Content = res.Content
	}
	return out, nil
}

// tailBuffer keeps the last max bytes of a stream and logs its lines.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) drain(r io.Reader, log *slog.Logger) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			t.mu.Lock()
			t.b = append(t.b, buf[:n]...)
			if len(t.b) > t.max {
				t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
			}
			t.mu.Unlock()
			for _, line := range strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n") {
				log.Debug("upstream.stderr", "line", line)
			}
		}
		if err != nil {
			return
		}
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
