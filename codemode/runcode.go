package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bubbuild/bub-mcp/codemode/runner"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/host"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// Defaults of run_code's limits, used when the host's configuration leaves
// them zero ([codemode] max_timeout_seconds and max_calls in bub.toml).
const (
	DefaultTimeoutSeconds    = 120
	DefaultMaxTimeoutSeconds = 600
	DefaultMaxCalls          = runner.DefaultMaxCalls
)

// CodeModeName is the runtime name of the command that switches a
// session's code mode.
const CodeModeName = "code_mode"

func init() {
	registry.MustRegister(RunCodeTool())
	registry.MustRegister(CodeModeTool())
}

// RunCodeIn are run_code's arguments.
type RunCodeIn struct {
	Code           string `json:"code" jsonschema_description:"Python source. Top-level await works; call tools as await tools.<name>(key=value, ...)."`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"default=120,minimum=1" jsonschema_description:"Seconds the code may run before it is killed."`
}

const runCodeDescription = "Run Python code that calls tools as `await tools.<name>(...)` and return what it prints. " +
	"Only in code mode, where the tools it can call are declared in a stub file named in the instructions."

// RunCodeTool returns a new run_code tool (registered in registry.Default
// by this package's init; tests register it in their own registries). It
// must run through a host.Host, which it reaches through the call's
// context: the caller's View names the tools the code may call, nested
// calls go through Host.CallNested, and the session's Environment runs
// the code. Without code tools in the View it fails with invalid_input
// "Code mode is not enabled for this run.".
func RunCodeTool() *registry.Tool {
	return registry.MustNewTool(RunCodeName, runCodeDescription, runCode,
		registry.WithPreserve(),
		registry.WithAnnotations(registry.Annotations{Title: "Run code", Destructive: true, OpenWorld: true}))
}

// errRunTimeout is the cause of the context run_code gives the code.
var errRunTimeout = errors.New("codemode: run_code timeout")

func notEnabled() *registry.Error {
	return registry.NewError(registry.KindInvalidInput, "Code mode is not enabled for this run.", nil)
}

func runCode(ctx context.Context, tc *registry.ToolContext, in RunCodeIn) (string, error) {
	h, ok := host.FromContext(ctx)
	if !ok {
		return "", notEnabled()
	}
	conn, ok := host.ConnectionFrom(ctx)
	if !ok {
		return "", notEnabled()
	}
	view, err := h.View(ctx, conn)
	if err != nil {
		return "", registry.NewError(registry.KindConfig, err.Error(), nil)
	}
	if len(view.CodeTools) == 0 {
		return "", notEnabled()
	}
	cfg := h.Config().CodeMode
	maxTimeout := cfg.MaxTimeoutSeconds
	if maxTimeout <= 0 {
		maxTimeout = DefaultMaxTimeoutSeconds
	}
	timeout := in.TimeoutSeconds
	if timeout == 0 {
		timeout = DefaultTimeoutSeconds
	}
	if timeout < 1 || timeout > maxTimeout {
		return "", registry.NewError(registry.KindInvalidInput,
			fmt.Sprintf("timeout_seconds must be between 1 and %d.", maxTimeout), nil)
	}
	var env environment.Environment
	if tc != nil {
		env, _ = tc.Env.(environment.Environment)
	}
	if env == nil {
		return "", registry.NewError(registry.KindConfig, "run_code needs the session's environment, and this call has none.", nil)
	}
	maxCalls := cfg.MaxCalls
	if maxCalls <= 0 {
		maxCalls = DefaultMaxCalls
	}

	names := make([]string, len(view.CodeTools))
	for i, t := range view.CodeTools {
		names[i] = t.ModelName()
	}
	nestedPeer := quietPeer{tc.Peer}
	var printed float64
	req := environment.CodeRequest{
		Code:  in.Code,
		Tools: names,
		Call: func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
			t, ok := view.LookupCode(name)
			if !ok {
				return nil, fmt.Errorf("[tool] unknown tool %q", name)
			}
			res := h.CallNested(ctx, conn, t, args, tc, nestedPeer)
			if res.Err != nil {
				return nil, res.Err // "[kind] message", raised inside the code
			}
			b, err := json.Marshal(res.Value)
			if err != nil {
				return nil, fmt.Errorf("tool result is not JSON serializable: %v", err)
			}
			return b, nil
		},
		Output: func(chunk string) {
			printed += float64(len(chunk))
			tc.Progress(ctx, printed, 0, chunk)
		},
		MaxCalls: maxCalls,
	}
	runCtx, cancel := context.WithTimeoutCause(ctx, time.Duration(timeout)*time.Second, errRunTimeout)
	defer cancel()
	out, err := env.RunCode(runCtx, req)
	if err == nil {
		return out, nil
	}
	return "", codeError(ctx, runCtx, err, out, timeout)
}

// codeError turns what RunCode returned into run_code's error, with Bub's
// messages.
func codeError(ctx, runCtx context.Context, err error, out string, timeout int) error {
	var (
		ce *runner.CodeError
		cr *runner.CrashError
		te *runner.TimeoutError
		ca *runner.CanceledError
	)
	switch {
	case errors.As(err, &ce):
		return &registry.Error{Kind: registry.KindTool, Message: ce.Error(),
			Details: map[string]any{"output": ce.Output, "traceback": ce.Traceback}, Cause: err}
	case errors.As(err, &cr):
		return &registry.Error{Kind: registry.KindTool, Message: cr.Error(),
			Details: map[string]any{"stderr": cr.Stderr, "output": cr.Output}, Cause: err}
	case ctx.Err() != nil:
		return ctx.Err() // the caller left: the executor reports the cancellation
	case errors.Is(context.Cause(runCtx), errRunTimeout):
		if errors.As(err, &te) {
			out = te.Output
		} else if errors.As(err, &ca) {
			out = ca.Output
		}
		return &registry.Error{Kind: registry.KindTool, Message: fmt.Sprintf("Code timed out after %d seconds", timeout),
			Details: map[string]any{"output": out}, Cause: err}
	case errors.As(err, &te):
		return &registry.Error{Kind: registry.KindTool, Message: te.Error(),
			Details: map[string]any{"output": te.Output}, Cause: err}
	case errors.Is(err, environment.ErrCodeUnavailable):
		return &registry.Error{Kind: registry.KindConfig, Message: "Code execution is not available in this session's environment.", Cause: err}
	}
	return &registry.Error{Kind: registry.KindTool, Message: "Code runner failed: " + err.Error(), Cause: err}
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

// CodeModeIn are code_mode's arguments.
type CodeModeIn struct {
	Enable bool `json:"enable" jsonschema_description:"true to turn code mode on for this session, false to turn it off."`
}

// CodeModeTool returns a new code_mode command (command-only: models never
// see it), Bub's ",code_mode enable=true|false". It records the session's
// switch, which applies from the next turn (the next tools/list) and
// survives restarts.
func CodeModeTool() *registry.Tool {
	return registry.MustNewTool(CodeModeName, "Turn code mode on or off for this session (applies from the next turn).", codeModeSwitch,
		registry.WithCommandOnly(),
		registry.WithAnnotations(registry.Annotations{Title: "Code mode switch", Idempotent: true}))
}

func codeModeSwitch(ctx context.Context, tc *registry.ToolContext, in CodeModeIn) (string, error) {
	sess, ok := sessions.FromContext(ctx)
	if !ok {
		return "", registry.NewError(registry.KindConfig, "code_mode needs a session, and this call has none.", nil)
	}
	if err := sess.SetCodeMode(in.Enable); err != nil {
		return "", err
	}
	state := "disabled"
	if in.Enable {
		state = "enabled"
	}
	return "Session code mode " + state + " (applies from the next turn).", nil
}
