// Package host is the application core shared by the MCP server, the agent
// loop and `bub-mcp call`: it turns a Connection into a session (tape,
// settings, spill storage), an Environment and a View, and runs calls
// through one Executor with the builtin hooks (spill, audit trail).
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// Options configure a Host. Zero values are documented per field.
type Options struct {
	// Config is required (config.Default() for zero configuration).
	Config *config.Config
	// Registry holds the tools; default registry.Default.
	Registry *registry.Registry
	// Home is $BUB_HOME; default sessions.DefaultHome().
	Home string
	// Workspace is used by profiles without one; default the current
	// directory.
	Workspace string
	// Environments provides a session's Environment; default a
	// LocalEnvironment per (session, workspace) with the profile's
	// confinement.
	Environments environment.Factory
	// Providers run after the profile scope.
	Providers []providers.Provider
	// CodeMode splits views for code mode (codemode.Provider); nil means
	// no code mode.
	CodeMode providers.CodeModeFunc
	// CodeRunner makes the code runner of each default LocalEnvironment
	// (codemode.LocalRunner); nil means their RunCode is unavailable.
	// Ignored when Environments is set.
	CodeRunner environment.CodeRunnerFactory
	// SpillThreshold overrides config and BUB_SPILL_THRESHOLD when non-nil.
	SpillThreshold *int
	// Getenv reads environment variables; default os.Getenv.
	Getenv func(string) string
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Host wires sessions, environments, views and the executor together. It is
// safe for concurrent use.
type Host struct {
	cfg       *config.Config
	reg       *registry.Registry
	store     *sessions.Store
	exec      *registry.Executor
	nested    *registry.Executor // run_code's calls: same hooks, unrendered
	runner    environment.CodeRunnerFactory
	chain     *providers.Chain
	factory   environment.Factory
	workspace string
	log       *slog.Logger
	runs      atomic.Uint64

	mu     sync.Mutex
	envs   map[string]environment.Environment
	closed bool
}

// New opens the session store and builds the executor and view chain.
func New(opts *Options) (*Host, error) {
	if opts == nil || opts.Config == nil {
		return nil, errors.New("host: Options.Config is required")
	}
	o := *opts
	if o.Registry == nil {
		o.Registry = registry.Default
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Home == "" {
		home, err := sessions.DefaultHome()
		if err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		o.Home = home
	}
	if o.Workspace == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("host: workspace: %w", err)
		}
		o.Workspace = wd
	}
	store, err := sessions.Open(o.Home, &sessions.Options{CommitInterval: o.Config.Server.AuditCommitInterval.Duration, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	h := &Host{cfg: o.Config, reg: o.Registry, store: store, workspace: o.Workspace, log: o.Logger, envs: map[string]environment.Environment{}}
	h.factory = o.Environments
	h.runner = o.CodeRunner
	threshold := 4096
	if v := o.Getenv("BUB_SPILL_THRESHOLD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			store.Close()
			return nil, fmt.Errorf("host: BUB_SPILL_THRESHOLD=%q: want a whole number >= 0", v)
		}
		threshold = n
	}
	if o.Config.Tools.SpillThreshold != nil {
		threshold = *o.Config.Tools.SpillThreshold
	}
	if o.SpillThreshold != nil {
		threshold = *o.SpillThreshold
	}
	builtinHooks := []registry.Hooks{registry.SpillHook(threshold, spiller{}, o.Logger)}
	h.exec = registry.NewExecutor(o.Registry, &registry.ExecutorOptions{
		MaxConcurrency: o.Config.Tools.MaxConcurrency,
		Hooks:          builtinHooks,
		Logger:         o.Logger,
	})
	h.nested = registry.NewExecutor(o.Registry, &registry.ExecutorOptions{
		Raw:    true,
		Hooks:  builtinHooks,
		Logger: o.Logger,
	})
	provs := append([]providers.Provider{providers.ScopeProvider(h.scope)}, o.Providers...)
	h.chain = providers.NewChain(o.Registry, &providers.ChainOptions{Providers: provs, CodeMode: o.CodeMode})
	return h, nil
}

// Config returns the configuration the host runs with.
func (h *Host) Config() *config.Config { return h.cfg }

// Registry returns the tool registry.
func (h *Host) Registry() *registry.Registry { return h.reg }

// Executor returns the model-facing executor (rendering on).
func (h *Host) Executor() *registry.Executor { return h.exec }

// Store returns the session store.
func (h *Host) Store() *sessions.Store { return h.store }

func (h *Host) scope(conn *providers.Connection) providers.Scope {
	if p, ok := h.cfg.Profiles[conn.Profile]; ok {
		return p.Scope()
	}
	return providers.Scope{Allow: []string{"\x00none"}} // unknown profile: nothing
}

// Profile returns a profile by name.
func (h *Host) Profile(name string) (*config.Profile, error) {
	if name == "" {
		name = config.DefaultProfile
	}
	p, ok := h.cfg.Profiles[name]
	if !ok {
		return nil, fmt.Errorf("host: unknown profile %q (defined: %v)", name, h.cfg.ProfileNames())
	}
	return p, nil
}

// Resolve fills in a connection's session key, workspace and code-mode
// setting from its profile and the session's persisted settings.
func (h *Host) Resolve(ctx context.Context, conn *providers.Connection) error {
	p, err := h.Profile(conn.Profile)
	if err != nil {
		return err
	}
	conn.Profile = p.Name
	if conn.SessionKey == "" {
		conn.SessionKey = p.SessionKey()
	}
	if conn.Workspace == "" {
		conn.Workspace = p.Workspace
		if conn.Workspace == "" {
			conn.Workspace = h.workspace
		}
	}
	sess, err := h.Session(conn)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	conn.CodeMode = p.CodeMode
	if cm := sess.Settings().CodeMode; cm != nil {
		conn.CodeMode = *cm
	}
	return nil
}

// View returns the connection's View (resolve it first).
func (h *Host) View(ctx context.Context, conn *providers.Connection) (*providers.View, error) {
	return h.chain.View(ctx, conn)
}

// Session returns the resolved connection's session.
func (h *Host) Session(conn *providers.Connection) (*sessions.Session, error) {
	return h.store.Session(conn.Workspace, conn.SessionKey)
}

// Environment returns the session's Environment, creating it on first use.
func (h *Host) Environment(ctx context.Context, conn *providers.Connection) (environment.Environment, error) {
	key := conn.SessionKey + "\x00" + conn.Workspace + "\x00" + conn.Profile
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, environment.ErrClosed
	}
	if env, ok := h.envs[key]; ok {
		return env, nil
	}
	factory := h.factory
	if factory == nil {
		p, _ := h.Profile(conn.Profile)
		opts := environment.LocalOptions{Workspace: conn.Workspace, Python: h.cfg.CodeMode.Python, NewCodeRunner: h.runner}
		if p != nil {
			opts.Confine = p.Confine
		}
		// Code mode's stubs must stay readable (fs.read) in a confined
		// profile; the rest of $BUB_HOME (tapes) stays out of reach.
		opts.AllowPaths = []string{filepath.Join(h.store.Home(), "codemode")}
		factory = environment.LocalFactory(opts)
	}
	env, err := factory(ctx, conn.SessionKey, conn.Workspace)
	if err != nil {
		return nil, fmt.Errorf("host: environment for session %q: %w", conn.SessionKey, err)
	}
	h.envs[key] = env
	return env, nil
}

// Call runs one call for a resolved connection: the session and its
// Environment are attached to the call, and the call and its result are
// appended to the session's tape as an audit trail (group-committed, off
// the hot path).
// c's Args (and Decoded) are used; Tool and Context are set here.
func (h *Host) Call(ctx context.Context, conn *providers.Connection, tool *registry.Tool, c registry.Call, peer registry.Peer) registry.Result {
	c.Tool, c.Lax = tool.Name, false
	return h.call(ctx, conn, tool, c, peer)
}

func (h *Host) call(ctx context.Context, conn *providers.Connection, tool *registry.Tool, c registry.Call, peer registry.Peer) registry.Result {
	ctx, tc, sess, perr := h.prepare(ctx, conn, "", "", nil, peer)
	if perr != nil {
		return registry.Result{Tool: tool.Name, Err: perr}
	}
	c.Context = tc
	tape := sess.Tape()
	callID := tc.RunID
	buf := make([]byte, 0, 256+len(c.Args))
	buf = auditMeta(buf, conn, callID)
	meta := buf[:len(buf):len(buf)] // shared by both entries
	payload := auditCall(buf[len(buf):], callID, tool.ModelName(), c.Args)
	if err := tape.AppendAsyncJSON(sessions.KindToolCall, payload, meta); err != nil {
		h.log.WarnContext(ctx, "host.audit.failed", "error", err)
	}
	res := h.exec.CallTool(ctx, tool, c)
	payload = auditResult(make([]byte, 0, 96+len(res.Text)), callID, &res)
	if err := tape.AppendAsyncJSON(sessions.KindToolResult, payload, meta); err != nil {
		h.log.WarnContext(ctx, "host.audit.failed", "error", err)
	}
	return res
}

// prepare attaches what every call carries: the session (in ctx), the
// Environment (envSession's when set, else the connection's), the
// connection and the host (in ctx), and a ToolContext with a run id (a
// fresh one when runID is empty).
func (h *Host) prepare(ctx context.Context, conn *providers.Connection, envSession, runID string, state map[string]any, peer registry.Peer) (context.Context, *registry.ToolContext, *sessions.Session, *registry.Error) {
	sess, err := h.Session(conn)
	if err != nil {
		return ctx, nil, nil, registry.AsError(err, registry.KindConfig)
	}
	envConn := conn
	if envSession != "" && envSession != conn.SessionKey {
		c := *conn
		c.SessionKey = envSession
		envConn = &c
	}
	env, err := h.Environment(ctx, envConn)
	if err != nil {
		return ctx, nil, nil, registry.AsError(err, registry.KindConfig)
	}
	if runID == "" {
		runID = h.newRunID(conn)
	}
	tc := &registry.ToolContext{SessionID: conn.SessionKey, RunID: runID, State: state, Env: env, Peer: peer}
	ctx = sessions.NewContext(ctx, sess)
	ctx = WithConnection(ctx, conn)
	ctx = context.WithValue(ctx, hostKey{}, h)
	return ctx, tc, sess, nil
}

// newRunID returns a fresh run id, unique within the host.
func (h *Host) newRunID(conn *providers.Connection) string {
	return conn.Transport + "-" + strconv.FormatUint(h.runs.Add(1), 10)
}

// CallNested runs a call that code inside run_code made, as Bub's nested
// ToolExecutor does: through the same hooks as Call, with
// ToolContext.CodeMode set, and unrendered, so Result.Value is what goes
// back to the code (it never reaches a model, so it is not spilled either).
// The call shares the session, run id, environment and state of parent,
// the run_code call; peer reaches the client. The caller decides which
// tools code may call (the View's CodeTools).
//
// As in Bub, nested calls are not recorded on the tape: they are no turn
// of the conversation (a tool_call/tool_result pair would corrupt the
// context rebuilt from it), and the run_code call itself is recorded with
// its code and output. Hooks see every nested call.
func (h *Host) CallNested(ctx context.Context, conn *providers.Connection, tool *registry.Tool, args json.RawMessage, parent *registry.ToolContext, peer registry.Peer) registry.Result {
	if _, ok := sessions.FromContext(ctx); !ok { // set by the run_code call
		sess, err := h.Session(conn)
		if err != nil {
			return registry.Result{Tool: tool.Name, Err: registry.AsError(err, registry.KindConfig)}
		}
		ctx = sessions.NewContext(ctx, sess)
	}
	tc := &registry.ToolContext{SessionID: conn.SessionKey, CodeMode: true, Peer: peer}
	if parent != nil {
		tc.RunID, tc.State, tc.Env = parent.RunID, parent.State, parent.Env
	}
	if tc.Env == nil {
		env, err := h.Environment(ctx, conn)
		if err != nil {
			return registry.Result{Tool: tool.Name, Err: registry.AsError(err, registry.KindConfig)}
		}
		tc.Env = env
	}
	if tc.RunID == "" {
		tc.RunID = h.newRunID(conn)
	}
	if _, ok := ConnectionFrom(ctx); !ok {
		ctx = WithConnection(ctx, conn)
	}
	if _, ok := FromContext(ctx); !ok {
		ctx = context.WithValue(ctx, hostKey{}, h)
	}
	return h.nested.CallTool(ctx, tool, registry.Call{Tool: tool.Name, Args: args, Context: tc})
}

// CallCommand runs a tool a human named (comma command, `bub-mcp call`):
// by runtime name, outside any View, with lax coercion, as Bub's commands
// do. It is recorded on the tape like any call.
func (h *Host) CallCommand(ctx context.Context, conn *providers.Connection, name string, args json.RawMessage, peer registry.Peer) registry.Result {
	tool, err := h.reg.Lookup(name)
	if err != nil {
		return registry.Result{Tool: name, Err: registry.AsError(err, registry.KindNotFound)}
	}
	return h.call(ctx, conn, tool, registry.Call{Tool: tool.Name, Args: args, Lax: true}, peer)
}

// Close ends every Environment (killing their processes) and flushes the
// tapes.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	envs := h.envs
	h.envs = map[string]environment.Environment{}
	h.mu.Unlock()
	var errs []error
	for _, env := range envs {
		if err := env.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := h.store.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// spiller stores oversized outputs in the call's session.
type spiller struct{}

func (spiller) Spill(ctx context.Context, tc *registry.ToolContext, tool, text string) (string, error) {
	sess, ok := sessions.FromContext(ctx)
	if !ok {
		return sessions.FormatSpillFailure(text), sessions.ErrNoSpillSidecar
	}
	ref, err := sess.Spill(tool, text)
	if err != nil {
		return sessions.FormatSpillFailure(text), err
	}
	return sessions.FormatSpillReference(ref, text), nil
}

type (
	connKey struct{}
	hostKey struct{}
)

// FromContext returns the Host running the call in ctx, for tools that act
// on their caller's behalf: run_code reads the caller's View and makes
// nested calls through it.
func FromContext(ctx context.Context) (*Host, bool) {
	h, ok := ctx.Value(hostKey{}).(*Host)
	return h, ok && h != nil
}

// WithConnection attaches the resolved connection to a call's context, for
// tools that act on the session itself (code mode, tape).
func WithConnection(ctx context.Context, conn *providers.Connection) context.Context {
	return context.WithValue(ctx, connKey{}, conn)
}

// ConnectionFrom returns the connection a call runs for.
func ConnectionFrom(ctx context.Context) (*providers.Connection, bool) {
	c, ok := ctx.Value(connKey{}).(*providers.Connection)
	return c, ok
}
