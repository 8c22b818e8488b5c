package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/codemode/runner"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// CodeModeName is the runtime name of the command that switches a
// session's code mode.
const CodeModeName = "code_mode"

// RunCodeIn are run_code's arguments.
type RunCodeIn struct {
	Code           string `json:"code" jsonschema_description:"Python source. Top-level await works; call tools as await tools.<name>(key=value, ...)."`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"default=120,minimum=1" jsonschema_description:"Seconds the code may run before it is killed."`
}

const runCodeDescription = "Run Python code that calls tools as `await tools.<name>(...)` and return what it prints. " +
	"Only in code mode, where the tools it can call are declared in a stub file named in the instructions."

// runCodeTool is run_code bound to m's settings and runners. The call's
// ToolContext gives it everything else: Tools lists the View's code tools
// and makes the nested calls (through the App's one call path, so hooks
// see them), and Env runs the interpreter. Without code tools it fails
// with invalid_input "Code mode is not enabled for this run.".
func (m *Module) runCodeTool() *registry.Tool {
	return registry.MustNewTool(RunCodeName, runCodeDescription, m.runCode,
		registry.WithPreserve(),
		registry.WithAnnotations(registry.Annotations{Title: "Run code", Destructive: true, OpenWorld: true}))
}

// errRunTimeout is the cause of the context run_code gives the code.
var errRunTimeout = errors.New("codemode: run_code timeout")

func notEnabled() *registry.Error {
	return registry.NewError(registry.KindInvalidInput, "Code mode is not enabled for this run.", nil)
}

func (m *Module) runCode(ctx context.Context, tc *registry.ToolContext, in RunCodeIn) (string, error) {
	if !m.available {
		// Say what is missing rather than "not enabled": the switch may be
		// on, and the fix is an interpreter.
		return "", registry.NewError(registry.KindConfig, fmt.Sprintf("Python was not found (%q is not on PATH): install Python 3, or set [codemode] python in bub.toml to the interpreter's path.", m.Python), nil)
	}
	var code []*registry.Tool
	if tc != nil && tc.Tools != nil {
		_, code = tc.Tools.List()
	}
	if len(code) == 0 {
		return "", notEnabled()
	}
	timeout := in.TimeoutSeconds
	if timeout == 0 {
		timeout = DefaultTimeoutSeconds
	}
	if timeout < 1 || timeout > m.MaxTimeoutSeconds {
		return "", registry.NewError(registry.KindInvalidInput,
			fmt.Sprintf("timeout_seconds must be between 1 and %d.", m.MaxTimeoutSeconds), nil)
	}
	env := tc.Env
	if env == nil {
		return "", registry.NewError(registry.KindConfig, "run_code needs the session's environment, and this call has none.", nil)
	}
	names := make([]string, len(code))
	for i, t := range code {
		names[i] = t.ModelName()
	}
	call := func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		res := tc.Tools.Call(ctx, name, args)
		if res.Err != nil {
			return nil, nestedError(res.Err) // raised inside the code
		}
		return resultJSON(res.Value)
	}
	var printed float64
	output := func(chunk string) {
		printed += float64(len(chunk))
		tc.Progress(ctx, printed, 0, chunk)
	}
	runCtx, cancel := context.WithTimeoutCause(ctx, time.Duration(timeout)*time.Second, errRunTimeout)
	defer cancel()
	if cr, ok := env.(environment.CodeRunner); ok {
		return m.runIn(ctx, runCtx, cr, in.Code, names, call, output, timeout)
	}
	r, release, err := m.runners.get(env, m.pythonFor(env), m.Pool, int64(m.Memory))
	if err != nil {
		return "", codeError(ctx, ctx, err, "", timeout, m.MaxTimeoutSeconds)
	}
	defer release()
	req := runner.Request{
		Code:     in.Code,
		Tools:    names, // the runner refuses any other name, as Bub does
		Call:     call,
		Output:   output,
		MaxCalls: m.MaxCalls,
	}
	out, err := r.Run(runCtx, req)
	if err == nil {
		return out, nil
	}
	m.runners.failed(env, r, err)
	return "", codeError(ctx, runCtx, err, out, timeout, m.MaxTimeoutSeconds)
}

// runIn runs code with the environment's own CodeRunner. The host keeps
// what Bub's run_code keeps: the names the code may call and the bound on
// their number, the output (streamed as progress and returned), the
// timeout and Bub's error messages.
func (m *Module) runIn(ctx, runCtx context.Context, cr environment.CodeRunner, code string, names []string,
	call func(context.Context, string, json.RawMessage) (json.RawMessage, error), output func(string), timeout int) (string, error) {
	allowed := make(map[string]bool, len(names))
	for _, n := range names {
		allowed[n] = true
	}
	var (
		mu    sync.Mutex
		out   strings.Builder
		calls int
	)
	req := environment.CodeRequest{
		Code:  code,
		Tools: names,
		CallTool: func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			switch {
			case !allowed[name]:
				return nil, fmt.Errorf("[tool] unknown tool %q", name)
			case n > m.MaxCalls:
				return nil, fmt.Errorf("[tool] too many tool calls: the limit is %d per run", m.MaxCalls)
			}
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage("{}")
			}
			return call(ctx, name, args)
		},
		Write: func(chunk string) {
			mu.Lock()
			defer mu.Unlock()
			out.WriteString(chunk)
			output(chunk)
		},
	}
	err := cr.RunCode(runCtx, req)
	mu.Lock()
	printed := out.String()
	mu.Unlock()
	var cf *environment.CodeFailed
	switch {
	case err == nil && runCtx.Err() == nil:
		return printed, nil
	case ctx.Err() != nil:
		return "", ctx.Err() // the caller left: the executor reports the cancellation
	case errors.Is(context.Cause(runCtx), errRunTimeout):
		return "", &registry.Error{Kind: registry.KindTool, Message: timedOut(timeout, m.MaxTimeoutSeconds),
			Details: map[string]any{"output": printed}, Cause: err}
	case errors.As(err, &cf):
		return "", &registry.Error{Kind: registry.KindTool, Message: "Code raised " + cf.Message,
			Details: map[string]any{"output": printed, "traceback": cf.Traceback}, Cause: err}
	}
	return "", &registry.Error{Kind: registry.KindTool, Message: "Code runner failed: " + err.Error(),
		Details: map[string]any{"output": printed}, Cause: err}
}

// timedOut is the message of a run killed after timeout seconds: Bub's,
// then what the model can do about it, which depends on whether a longer
// timeout_seconds is allowed.
func timedOut(timeout, maxTimeout int) string {
	msg := fmt.Sprintf("Code timed out after %d seconds", timeout)
	if timeout < maxTimeout {
		return msg + fmt.Sprintf(" (pass a larger timeout_seconds, at most %d, or do less in one run)", maxTimeout)
	}
	return msg + fmt.Sprintf(" (%d seconds is the most run_code allows: do less in one run)", maxTimeout)
}

// codeError turns what the runner returned into run_code's error, with
// Bub's messages.
func codeError(ctx, runCtx context.Context, err error, out string, timeout, maxTimeout int) error {
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
		return &registry.Error{Kind: registry.KindTool, Message: timedOut(timeout, maxTimeout),
			Details: map[string]any{"output": out}, Cause: err}
	case errors.As(err, &te):
		return &registry.Error{Kind: registry.KindTool, Message: te.Error(),
			Details: map[string]any{"output": te.Output}, Cause: err}
	}
	return &registry.Error{Kind: registry.KindTool, Message: "Code runner failed: " + err.Error(), Cause: err}
}

// CodeModeIn are code_mode's arguments.
type CodeModeIn struct {
	Enable bool `json:"enable" jsonschema_description:"true to turn code mode on for this session, false to turn it off."`
}

// codeModeTool is the code_mode command (command-only: models never see
// it), Bub's ",code_mode enable=true|false". It records the session's
// switch, which applies from the next turn (the next tools/list) and
// survives restarts.
func (m *Module) codeModeTool() *registry.Tool {
	return registry.MustNewTool(CodeModeName, "Turn code mode on or off for this session (applies from the next turn).", m.codeModeSwitch,
		registry.WithCommandOnly(),
		registry.WithAnnotations(registry.Annotations{Title: "Code mode switch", Idempotent: true}))
}

func (m *Module) codeModeSwitch(ctx context.Context, tc *registry.ToolContext, in CodeModeIn) (string, error) {
	if tc == nil || tc.Session == nil {
		return "", registry.NewError(registry.KindConfig, "code_mode needs a session, and this call has none.", nil)
	}
	if err := tc.Session.SetCodeMode(in.Enable); err != nil {
		return "", err
	}
	state := "disabled"
	if in.Enable {
		state = "enabled"
	}
	msg := "Session code mode " + state + " (applies from the next turn)."
	if in.Enable && !m.available {
		// The switch is recorded (it applies once Python is there), but
		// the next turn would be direct: say so rather than let the user
		// wonder where run_code went.
		msg += "\n" + fmt.Sprintf("run_code will not be offered: Python was not found (%q is not on PATH), so the tools stay direct. "+
			"Install Python 3, or set [codemode] python in bub.toml to the interpreter's path.", m.Python)
	}
	return msg, nil
}
