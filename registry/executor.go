package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"
)

// Call is one request to run a tool.
type Call struct {
	// Tool is the runtime or model name.
	Tool string
	// Args is a JSON object; empty means {}.
	Args json.RawMessage
	// Context is handed to hooks and the handler; nil means an empty one.
	Context *ToolContext
	// Lax coerces strings to the schema's scalar types ("5"→5, "true"→
	// true), as Bub's pydantic validation does for every caller: humans
	// type strings, and models often quote numbers.
	Lax bool
	// Decoded is Args already decoded as encoding/json decodes an object
	// into any, when the caller has it (the MCP layer does): validation
	// then skips decoding Args again. It must be Args' decoding; it is not
	// modified, and ignored once a hook rewrites the arguments.
	Decoded map[string]any
}

// Result is the outcome of a call.
type Result struct {
	// Tool is the runtime name of the tool that ran, or the requested name
	// when no tool matched.
	Tool string
	// Args are the arguments the handler got, after hooks and defaults.
	Args json.RawMessage
	// Value is the structured result (nil on error).
	Value any
	// Text is the rendered result; empty when the executor does not render
	// or the call failed.
	Text string
	// Err is set when the call failed.
	Err *Error
	// Duration is the wall time of the whole call, hooks included.
	Duration time.Duration
}

// Output is what a model should read: the text, or the error as JSON
// ({kind, message, details}), which is how Bub reports failures to models.
func (r *Result) Output() string {
	if r.Err != nil {
		return r.Err.JSON()
	}
	return r.Text
}

// ToolCall is what hooks see of a call in flight.
type ToolCall struct {
	// Tool is the tool being called.
	Tool *Tool
	// Name is the model-facing name, as Bub's call.tool is.
	Name string
	// Args may be rewritten by a before hook via ProceedWith.
	Args json.RawMessage
	// Context is the call's context (never nil).
	Context *ToolContext
}

// Decision is a before hook's verdict. The zero value proceeds unchanged.
type Decision struct {
	action  int
	args    json.RawMessage
	result  any
	message string
	err     *Error
}

const (
	proceed = iota
	replace
	deny
)

// Proceed lets the call go on unchanged.
func Proceed() Decision { return Decision{} }

// ProceedWith lets the call go on with new arguments; later hooks and the
// handler see them.
func ProceedWith(args json.RawMessage) Decision { return Decision{action: proceed, args: args} }

// Replace skips the handler; v becomes the (successful) result.
func Replace(v any) Decision { return Decision{action: replace, result: v} }

// Deny fails the call with message, or with "Tool 'X' call denied by policy
// hook." when message is empty.
func Deny(message string) Decision { return Decision{action: deny, message: message} }

// DenyError fails the call with err as it is: its kind and details reach
// the caller (a rate limit's retryAfterSeconds, say), not only a message.
func DenyError(err *Error) Decision { return Decision{action: deny, err: err} }

// Hooks observe and steer calls. Either function may be nil. A hook that
// panics is logged and skipped; it never takes the call down.
type Hooks struct {
	// Name identifies the hook in logs.
	Name string
	// Before runs before the handler. The first Replace or Deny stops the
	// chain.
	Before func(ctx context.Context, call *ToolCall) Decision
	// After sees the final result (success, error, deny or replace, but not
	// cancellation) and may change it.
	After func(ctx context.Context, call *ToolCall, res *Result)
}

// ExecutorOptions configure an Executor. The zero value renders results,
// runs batches without a concurrency limit and logs to slog.Default().
type ExecutorOptions struct {
	// Raw returns structured values unrendered (Text stays empty). Code
	// mode's nested calls need the values, not the model text.
	Raw bool
	// MaxConcurrency bounds CallMany; zero or less means unbounded, Bub's
	// default. Bub calls it max_tool_concurrency.
	MaxConcurrency int
	// Hooks are the host's builtin hooks (spill, audit). They count as
	// registered before the registry's, so they run after them, as Bub's
	// builtin plugin does.
	Hooks []Hooks
	// NoHooks runs no hooks at all, not even the registry's: a human's
	// comma command bypasses the policy and spill hooks meant for models,
	// as Bub's commands do.
	NoHooks bool
	// RuntimeNames makes argument errors name tools by their runtime names
	// (fs.read), the ones humans type; by default they use the names the
	// model calls (fs_read).
	RuntimeNames bool
	// Logger receives the per-call timing records; nil means slog.Default().
	Logger *slog.Logger
}

// Executor runs calls against a registry: arguments are validated, hooks
// run, the handler runs, the result is rendered. It is safe for concurrent
// use.
type Executor struct {
	reg   *Registry
	raw   bool
	sem   *semaphore.Weighted
	hooks []Hooks // in execution order: last registered first
	log   *slog.Logger

	runtimeNames bool
}

// NewExecutor returns an Executor over reg. Hooks are captured now, so
// register them (in init) before building executors.
func NewExecutor(reg *Registry, opts *ExecutorOptions) *Executor {
	var o ExecutorOptions
	if opts != nil {
		o = *opts
	}
	var hooks []Hooks
	if !o.NoHooks {
		hooks = append(append(hooks, o.Hooks...), reg.Hooks()...)
		slices.Reverse(hooks)
	}
	e := &Executor{reg: reg, raw: o.Raw, hooks: hooks, log: o.Logger, runtimeNames: o.RuntimeNames}
	if e.log == nil {
		e.log = slog.Default()
	}
	if o.MaxConcurrency > 0 {
		e.sem = semaphore.NewWeighted(int64(o.MaxConcurrency))
	}
	return e
}

// Registry returns the registry the executor looks tools up in.
func (e *Executor) Registry() *Registry { return e.reg }

// Call runs one call. It never panics and never returns a Go error: every
// failure is in Result.Err.
func (e *Executor) Call(ctx context.Context, c Call) Result {
	t, err := e.reg.Lookup(c.Tool)
	if err != nil {
		return Result{Tool: c.Tool, Args: c.Args, Err: AsError(err, KindNotFound)}
	}
	return e.CallTool(ctx, t, c)
}

// CallTool runs a call against a tool the caller already resolved (the MCP
// server resolves names against a connection's view, not the registry).
func (e *Executor) CallTool(ctx context.Context, t *Tool, c Call) Result {
	start := time.Now()
	tc := c.Context
	if tc == nil {
		tc = &ToolContext{}
	}
	call := &ToolCall{Tool: t, Name: t.ModelName(), Args: c.Args, Context: tc}
	debug := e.log.Enabled(ctx, slog.LevelDebug)
	if debug {
		e.log.LogAttrs(ctx, slog.LevelDebug, "tool.call.start", slog.String("name", t.Name), slog.String("args", summarizeArgs(call.Args)))
	}
	res := Result{Tool: t.Name}
	decided := false
	for i := range e.hooks {
		if e.hooks[i].Before == nil {
			continue
		}
		d, ok := e.runBefore(ctx, &e.hooks[i], call)
		if !ok {
			continue
		}
		if d.action == proceed {
			if d.args != nil {
				call.Args = d.args
				c.Decoded = nil
			}
			continue
		}
		if d.action == replace {
			res.Value = d.result
		} else {
			msg := d.message
			if msg == "" {
				msg = fmt.Sprintf("Tool '%s' call denied by policy hook.", t.Name)
			}
			res.Err = &Error{Kind: KindTool, Message: msg}
			if d.err != nil {
				res.Err = d.err
			}
		}
		decided = true
		break
	}
	res.Args = call.Args
	if !decided {
		name := call.Name
		if e.runtimeNames {
			name = t.Name
		}
		args, verr := t.checkArgs(call.Args, c.Decoded, c.Lax, name)
		if verr != nil {
			res.Err = verr
		} else {
			res.Args = args
			res.Value, res.Err = e.invoke(ctx, t, tc, args)
		}
	}
	if err := ctx.Err(); err != nil {
		res.Value = nil
		res.Err = cancelled(t.Name, err)
		res.Duration = time.Since(start)
		e.log.LogAttrs(ctx, slog.LevelInfo, "tool.call.cancelled", slog.String("name", t.Name), slog.Duration("elapsed_time", res.Duration))
		return res
	}
	if res.Err == nil && !e.raw {
		text, err := Render(t, res.Value)
		if err != nil {
			res.Err = &Error{Kind: KindTool, Message: fmt.Sprintf("Tool '%s' result could not be rendered.", t.Name),
				Details: map[string]any{"error": err.Error()}, Cause: err}
		} else {
			res.Text = text
		}
	}
	for i := range e.hooks {
		if e.hooks[i].After != nil {
			e.runAfter(ctx, &e.hooks[i], call, &res)
		}
	}
	res.Duration = time.Since(start)
	if res.Err != nil {
		e.log.LogAttrs(ctx, slog.LevelInfo, "tool.call.error", slog.String("name", t.Name), slog.Duration("elapsed_time", res.Duration), slog.String("error", res.Err.Error()))
	} else if debug {
		e.log.LogAttrs(ctx, slog.LevelDebug, "tool.call.success", slog.String("name", t.Name), slog.Duration("elapsed_time", res.Duration))
	}
	return res
}

// invoke runs the handler, turning panics and plain errors into tool errors.
func (e *Executor) invoke(ctx context.Context, t *Tool, tc *ToolContext, args json.RawMessage) (v any, rerr *Error) {
	defer func() {
		if p := recover(); p != nil {
			e.log.LogAttrs(ctx, slog.LevelError, "tool.call.panic", slog.String("name", t.Name), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			v, rerr = nil, executionFailed(t.Name, fmt.Sprintf("panic: %v", p), nil)
		}
	}()
	out, err := t.Handler(ctx, tc, args)
	if err == nil {
		return out, nil
	}
	var be *Error
	if errors.As(err, &be) {
		return nil, be
	}
	return nil, executionFailed(t.Name, err.Error(), err)
}

// executionFailed is the error of a handler that failed or panicked.
func executionFailed(tool, detail string, cause error) *Error {
	return &Error{Kind: KindTool, Message: "Tool '" + tool + "' execution failed.", Details: map[string]any{"error": detail}, Cause: cause}
}

// cancelled is the error of a call whose context ended before it finished.
func cancelled(tool string, cause error) *Error {
	return &Error{Kind: KindTool, Message: "Tool '" + tool + "' call was cancelled.", Cause: cause}
}

func (e *Executor) runBefore(ctx context.Context, h *Hooks, call *ToolCall) (d Decision, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			e.log.LogAttrs(ctx, slog.LevelError, "tool.hook.panic", slog.String("hook", h.Name), slog.String("stage", "before"), slog.String("name", call.Tool.Name), slog.Any("panic", p))
			ok = false
		}
	}()
	return h.Before(ctx, call), true
}

func (e *Executor) runAfter(ctx context.Context, h *Hooks, call *ToolCall, res *Result) {
	saved := *res
	defer func() {
		if p := recover(); p != nil {
			*res = saved
			e.log.LogAttrs(ctx, slog.LevelError, "tool.hook.panic", slog.String("hook", h.Name), slog.String("stage", "after"), slog.String("name", call.Tool.Name), slog.Any("panic", p))
		}
	}()
	h.After(ctx, call, res)
}

// CallMany runs a batch concurrently, at most MaxConcurrency at a time, and
// returns the results in call order. Calls waiting for a slot when ctx ends
// report cancellation.
func (e *Executor) CallMany(ctx context.Context, calls []Call) []Result {
	out := make([]Result, len(calls))
	done := make(chan struct{}, len(calls))
	for i := range calls {
		go func() {
			defer func() { done <- struct{}{} }()
			if e.sem != nil {
				if err := e.sem.Acquire(ctx, 1); err != nil {
					out[i] = Result{Tool: calls[i].Tool, Args: calls[i].Args, Err: cancelled(calls[i].Tool, err)}
					return
				}
				defer e.sem.Release(1)
			}
			out[i] = e.Call(ctx, calls[i])
		}()
	}
	for range calls {
		<-done
	}
	return out
}

// summarizeArgs formats arguments for the start log as Bub does:
// { k=v, ... } with every JSON value cut to 100 characters.
func summarizeArgs(args json.RawMessage) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil || len(m) == 0 {
		return "{ }"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("{ ")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		v := string(m[k])
		if r := []rune(v); len(r) > 100 {
			v = string(r[:100]) + "..."
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	b.WriteString(" }")
	return b.String()
}
