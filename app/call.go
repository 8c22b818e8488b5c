package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/telemetry"
	"golang.org/x/sync/semaphore"
)

// Mode says who makes a call, which decides where its tool is looked up
// and how its result is treated.
type Mode int

const (
	// Direct is a model's or client's call: the tool must be in the
	// caller's View; the result is rendered (and spilled when huge).
	Direct Mode = iota
	// Nested is a call made by code inside run_code through
	// ToolContext.Tools: the tool must be one of the View's code tools;
	// the result stays structured and is never spilled. It shares the
	// parent call's run id, state and environment.
	Nested
	// Command is a tool a human named (a comma command, `bub-mcp call`):
	// any registered tool by runtime or model name, outside any View,
	// without hooks or spill (a
	// policy meant for the model does not bind the operator, who sees the
	// whole output), as Bub's commands do.
	Command
)

func (m Mode) String() string {
	switch m {
	case Direct:
		return "direct"
	case Nested:
		return "nested"
	case Command:
		return "command"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Request is one call.
type Request struct {
	// Tool is the runtime or model name.
	Tool string
	// Args is a JSON object; empty means {}.
	Args json.RawMessage
	// Decoded is Args already decoded, when the transport has it
	// (registry.Call.Decoded).
	Decoded map[string]any
	// Mode says who calls; the zero value is Direct.
	Mode Mode
	// Peer reaches the client (progress, logs, sampling, elicitation);
	// nil means nobody listens.
	Peer registry.Peer
	// RunID groups the calls of one turn; empty assigns a fresh one.
	RunID string
	// State is shared by the calls of one run (ToolContext.State). In a
	// Command call its StateCodeMode entry switches code mode for the
	// call; Direct callers apply it to conn with ApplyState, before they
	// ask for the View they show.
	State map[string]any
	// EnvSession names the session whose Environment the call uses; empty
	// means the connection's own. A subagent shares its parent's
	// environment (shells, code runner), as Bub's does.
	EnvSession string
	// NoAudit leaves the call out of the audit log: the agent loop
	// records each model step on the tape itself, with the model's call
	// ids, as Bub does, and its agent_run call is audited.
	NoAudit bool

	parent *registry.ToolContext // Nested: the run_code call
}

// Call runs one call for a resolved connection: the tool is found as the
// mode says, the session and Environment are resolved once, and the call
// goes through the executor (validation, hooks, handler, rendering,
// spill). Direct and Command calls, refused ones included, are written to
// the audit log (group-committed, off the hot path) unless NoAudit is set;
// the session's tape is left to what Bub records there. It never panics;
// every failure is in Result.Err.
func (a *App) Call(ctx context.Context, conn *providers.Connection, req Request) registry.Result {
	start := time.Now()
	if _, ok := req.State[StateCodeMode]; ok && req.Mode == Command {
		// A per-call switch for a command (`bub-mcp call --state
		// code_mode=true run_code ...`): its nested calls see the View it
		// selects; the caller's conn and the session stay as they are.
		// Direct callers apply it themselves (ApplyState) before they
		// show a View, so that the View listed and the one checked here
		// agree.
		c := *conn
		if err := ApplyState(&c, req.State); err != nil {
			res := registry.Result{Tool: req.Tool, Args: req.Args, Err: &registry.Error{Kind: registry.KindInvalidInput, Message: err.Error()}}
			if !req.NoAudit {
				a.record(conn, &req, req.Tool, nil, start, &res)
			}
			return res
		}
		conn = &c
	}
	tool, view, rerr := a.lookup(ctx, conn, &req)
	if rerr != nil {
		res := registry.Result{Tool: req.Tool, Args: req.Args, Err: rerr}
		if req.Mode != Nested && !req.NoAudit {
			a.record(conn, &req, req.Tool, nil, start, &res)
		}
		return res
	}
	tc, perr := a.toolContext(ctx, conn, view, &req)
	if perr != nil {
		res := registry.Result{Tool: tool.Name, Err: perr}
		if req.Mode != Nested && !req.NoAudit {
			a.record(conn, &req, tool.ModelName(), nil, start, &res)
		}
		return res
	}
	// Every caller gets Bub's lax coercion ("1" → 1), models included.
	c := registry.Call{Tool: tool.Name, Args: req.Args, Decoded: req.Decoded, Context: tc, Lax: true}
	if req.Mode == Nested {
		// A child span of the run_code call's, named after the model name
		// the code used; unknown names were refused above and make none.
		ctx, span := a.tel.StartNested(ctx, tool.ModelName())
		res := a.nested.CallTool(ctx, tool, c)
		span.End(nestedOutcome(&res))
		return res
	}
	exec := a.exec
	if req.Mode == Command {
		exec = a.commands
	}
	res := exec.CallTool(ctx, tool, c)
	if !req.NoAudit {
		a.record(conn, &req, tool.ModelName(), tc, start, &res)
	}
	return res
}

// nestedOutcome is a nested call's outcome for telemetry: any failure is
// the tool's, reported to the code that called it.
func nestedOutcome(res *registry.Result) telemetry.Outcome {
	if res.Err == nil {
		return telemetry.Outcome{}
	}
	return telemetry.Outcome{ErrorType: telemetry.ToolError, Message: res.Err.Error()}
}

// lookup finds the request's tool where its mode allows.
func (a *App) lookup(ctx context.Context, conn *providers.Connection, req *Request) (*registry.Tool, *providers.View, *registry.Error) {
	if req.Mode == Command {
		t, err := a.reg.Lookup(req.Tool)
		if err != nil {
			if rerr := a.explainUnknown(req.Tool, nil); rerr != nil {
				return nil, nil, rerr
			}
			return nil, nil, registry.AsError(err, registry.KindNotFound)
		}
		view, _ := a.View(ctx, conn) // nested calls of a command's run_code
		return t, view, nil
	}
	view, err := a.View(ctx, conn)
	if err != nil {
		return nil, nil, registry.AsError(err, registry.KindConfig)
	}
	var (
		t  *registry.Tool
		ok bool
	)
	if req.Mode == Nested {
		t, ok = view.LookupCode(req.Tool)
	} else {
		t, ok = view.Lookup(req.Tool)
	}
	if !ok {
		if rerr := a.explainUnknown(req.Tool, a.scope(conn).Allowed); rerr != nil {
			return nil, nil, rerr
		}
		return nil, nil, &registry.Error{Kind: registry.KindNotFound, Message: fmt.Sprintf("unknown tool name(s): '%s'", req.Tool)}
	}
	return t, view, nil
}

// UnknownToolExplainer is a module that knows why a tool name it owns is
// not callable now (an upstream's quarantined tool): the caller is told
// that, and what a human can do about it, rather than "unknown tool".
type UnknownToolExplainer interface {
	// ExplainUnknownTool returns the message for name, or "" when the
	// module has nothing to say about it. visible reports whether the
	// caller could see a tool of that runtime name once it were callable:
	// a tool outside the caller's profile is not explained (that it
	// exists is not the caller's to know).
	ExplainUnknownTool(name string, visible func(runtimeName string) bool) string
}

// explainUnknown asks the modules about a name the caller's view lacks;
// visible is the caller's profile scope (nil: a human's command, which
// may see anything).
func (a *App) explainUnknown(name string, visible func(string) bool) *registry.Error {
	if visible == nil {
		visible = func(string) bool { return true }
	}
	for _, l := range a.mods {
		if e, ok := l.m.(UnknownToolExplainer); ok {
			if msg := e.ExplainUnknownTool(name, visible); msg != "" {
				return &registry.Error{Kind: registry.KindNotFound, Message: msg}
			}
		}
	}
	return nil
}

// toolContext gathers what the call may reach: its session, Environment,
// the View's other tools, the caller and the run.
func (a *App) toolContext(ctx context.Context, conn *providers.Connection, view *providers.View, req *Request) (*registry.ToolContext, *registry.Error) {
	if p := req.parent; p != nil {
		tc := &registry.ToolContext{Session: p.Session, Env: p.Env, Conn: p.Conn, Peer: req.Peer, State: p.State, RunID: p.RunID, CodeMode: true}
		tc.Tools = &viewTools{a: a, conn: conn, view: view, tc: tc}
		return tc, nil
	}
	sess, err := a.Session(conn)
	if err != nil {
		return nil, registry.AsError(err, registry.KindConfig)
	}
	envConn := conn
	if req.EnvSession != "" && req.EnvSession != conn.SessionKey {
		c := *conn
		c.SessionKey = req.EnvSession
		envConn = &c
	}
	env, err := a.Environment(ctx, envConn)
	if err != nil {
		return nil, registry.AsError(err, registry.KindConfig)
	}
	runID := req.RunID
	if runID == "" {
		runID = a.newRunID(conn)
	}
	tc := &registry.ToolContext{Session: sess, Env: env, Conn: conn, Peer: req.Peer, State: req.State, RunID: runID, CodeMode: req.Mode == Nested}
	if view != nil {
		vt := &viewTools{a: a, conn: conn, view: view, tc: tc}
		if n := a.maxConcurrency; n > 0 {
			vt.sem = semaphore.NewWeighted(int64(n))
		}
		tc.Tools = vt
	}
	return tc, nil
}

// viewTools is ToolContext.Tools: the caller's View, whose code tools are
// called in Nested mode.
type viewTools struct {
	a    *App
	conn *providers.Connection
	view *providers.View
	tc   *registry.ToolContext
	// sem bounds the nested calls of this one call (a run_code's
	// asyncio.gather) by [tools] max_concurrency; nil means unbounded.
	sem *semaphore.Weighted
}

func (t *viewTools) List() (direct, code []*registry.Tool) { return t.view.Tools, t.view.CodeTools }

func (t *viewTools) Call(ctx context.Context, name string, args json.RawMessage) registry.Result {
	if t.sem != nil {
		if err := t.sem.Acquire(ctx, 1); err != nil {
			return registry.Result{Tool: name, Args: args, Err: &registry.Error{Kind: registry.KindTool, Message: "Tool '" + name + "' call was cancelled.", Cause: err}}
		}
		defer t.sem.Release(1)
	}
	return t.a.Call(ctx, t.conn, Request{Tool: name, Args: args, Mode: Nested, Peer: quietPeer{t.tc.Peer}, parent: t.tc})
}

// quietPeer is the Peer of nested calls: the client's, except that their
// progress is dropped, since run_code reports its own under the same token
// and progress must only grow.
type quietPeer struct{ registry.Peer }

func (p quietPeer) Progress(context.Context, float64, float64, string) {}

func (p quietPeer) Log(ctx context.Context, level slog.Level, logger string, data any) {
	if p.Peer != nil {
		p.Peer.Log(ctx, level, logger, data)
	}
}

func (p quietPeer) Sample(ctx context.Context, req registry.SampleRequest) (*registry.SampleResult, error) {
	if p.Peer == nil {
		return nil, registry.ErrNoPeer
	}
	return p.Peer.Sample(ctx, req)
}

func (p quietPeer) Elicit(ctx context.Context, req registry.ElicitRequest) (*registry.ElicitResult, error) {
	if p.Peer == nil {
		return nil, registry.ErrNoPeer
	}
	return p.Peer.Elicit(ctx, req)
}

func (p quietPeer) Roots(ctx context.Context) ([]registry.Root, error) {
	rp, ok := p.Peer.(registry.RootsPeer)
	if !ok {
		return nil, &registry.CapabilityError{Capability: "roots"}
	}
	return rp.Roots(ctx)
}

// CanElicit passes on what the client's Peer knows (registry.ElicitCapable).
func (p quietPeer) CanElicit(ctx context.Context) bool {
	tc := registry.ToolContext{Peer: p.Peer}
	return tc.CanElicit(ctx)
}

var (
	_ registry.Tools         = (*viewTools)(nil)
	_ registry.ElicitCapable = quietPeer{}
)
