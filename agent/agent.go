// Package agent is bub-mcp's built-in agent: the loop that sends a model
// the tools and instructions of a connection's View, runs the calls it
// makes through the App (hooks, spill and environment apply, as for an
// MCP client), records every step on the session's tape the way Bub does,
// and continues until the model answers without calling a tool.
//
// The loop knows no transport: it takes an *app.App, a resolved
// providers.Connection, a model.Client and a Sink for its events. The
// terminal and JSON renderers, the REPL and comma commands sit on top.
// The package is also the "agent" module (see Module), which decodes the
// [agent] table and contributes the agent_run and subagent tools, which
// run nested turns.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/textmatch"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/bubbuild/bub-mcp/skills"
)

// ContinuePrompt is the user message of every step after the first, Bub's
// continue_prompt.
const ContinuePrompt = "Continue the task until all targets are completed."

// BasePrompt is the system prompt's guidance, before the View's
// instructions and the skills.
const BasePrompt = `You are Bub, an agent that completes tasks with tools.
Use the tools to inspect and change files and to run commands; never guess what a tool would return.
When a tool fails, read its error and correct the call. Call independent tools together in one reply.
When the task is done, reply with a short answer and no tool calls.`

// Options configure an Agent. Zero values are documented per field.
type Options struct {
	// Settings are the model settings (LoadSettings).
	Settings Settings
	// NewClient builds a model client; nil means model.New.
	NewClient func(model.Config) (model.Client, error)
	// SystemPrompt replaces BasePrompt when set.
	SystemPrompt string
	// MaxToolConcurrency bounds the calls of one step; zero means the
	// App's [tools] max_concurrency (whose zero is unbounded); negative
	// means unbounded.
	MaxToolConcurrency int
	// Attempts is how many times a model call is tried on network errors,
	// timeouts, 429 and 5xx; zero means 3.
	Attempts int
	// Backoff is the wait before the second attempt, doubled for each
	// further one; zero means 1 s.
	Backoff time.Duration
	// Logger; nil means the App's.
	Logger *slog.Logger
	// LLMHooks observe and steer the model calls (Bub's before_llm_call
	// and after_llm_call), next to those of modules implementing
	// LLMHooker; the last registered runs first.
	LLMHooks []LLMHooks
}

// Agent runs turns against an App. It is safe for concurrent use; turns
// of one session should not overlap (their steps would interleave on the
// tape).
type Agent struct {
	app  *app.App
	opts Options
	log  *slog.Logger
	// llmHooks returns the LLM hooks in running order. They are collected
	// on the first model call, not in New: the agent module builds its
	// Agent during its own Provision, before modules whose IDs sort after
	// "agent" are loaded, and their hooks would be lost.
	llmHooks func() []LLMHooks
}

// New returns an Agent over a, whose View, sessions and Call its turns
// use.
func New(a *app.App, opts *Options) *Agent {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Settings = o.Settings.withDefaults()
	if o.NewClient == nil {
		o.NewClient = model.New
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxToolConcurrency == 0 {
		o.MaxToolConcurrency = toolConcurrency(a.Config())
	}
	if o.SystemPrompt == "" {
		o.SystemPrompt = BasePrompt
	}
	if o.Logger == nil {
		o.Logger = a.Logger()
	}
	return &Agent{app: a, opts: o, log: o.Logger, llmHooks: sync.OnceValue(func() []LLMHooks { return collectLLMHooks(a, o.LLMHooks) })}
}

// toolConcurrency reads [tools] max_concurrency, which bounds a step's
// calls as it bounds a batch in the App's executor: the agent starts each
// call of a step on its own through App.Call, not as a batch, so it
// applies the bound itself. The App decoded and checked the table before
// any module, so decoding it again cannot fail.
func toolConcurrency(c *config.Config) int {
	var t struct {
		MaxConcurrency int `toml:"max_concurrency"`
	}
	_ = c.Decode("tools", &t)
	return t.MaxConcurrency
}

// App returns the App the agent runs calls through.
func (a *Agent) App() *app.App { return a.app }

// CommandPrefix returns what starts a comma command ("," by default).
func (a *Agent) CommandPrefix() string { return a.opts.Settings.CommandPrefix }

// Settings returns the agent's model settings.
func (a *Agent) Settings() Settings { return a.opts.Settings }

// Turn is one request to the agent.
type Turn struct {
	// Conn is the connection whose View, session and environment the turn
	// uses. It is resolved again at the start of the turn, so a code-mode
	// switch applies from the next turn.
	Conn *providers.Connection
	// Prompt is the user's message.
	Prompt string
	// Model overrides the session's model ("provider:model").
	Model string
	// ReasoningEffort overrides the session's ,reasoning_effort; empty
	// means the session's, else the provider's default.
	ReasoningEffort string
	// AllowedTools restricts the tools to these runtime or model names;
	// nil means every tool of the View.
	AllowedTools []string
	// AllowedSkills restricts the skill tool and the skills prompt; nil
	// means all.
	AllowedSkills []string
	// Sink receives the events; nil discards them.
	Sink Sink
	// Peer reaches the client that started the turn, for the tools' own
	// requests; nil means none.
	Peer registry.Peer
	// EnvSession names the session whose Environment the tools use;
	// empty means the turn's own. Subagents use their parent's.
	EnvSession string
	// State is the caller's request-scoped state (Bub's state=..., e.g. a
	// request_id): the turn's tools see a copy as ToolContext.State. It is
	// never persisted; keys the agent sets itself (StateModel,
	// allowed_skills) win over the caller's.
	State map[string]any
}

// Result is what a turn produced.
type Result struct {
	// Text is the final answer.
	Text      string       `json:"text"`
	ToolCalls []CallRecord `json:"tool_calls"`
	// Usage sums the turn's model calls.
	Usage     model.Usage `json:"usage"`
	Steps     int         `json:"steps"`
	Model     string      `json:"model"`
	SessionID string      `json:"session_id"`
}

// CallRecord is one tool call a turn made.
type CallRecord struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// ErrMaxSteps is wrapped by the error of a turn that used all its steps.
var ErrMaxSteps = errors.New("max steps reached")

// ModelFor returns the model a turn on conn's session would use: the
// session's ,model switch, else the settings' model ("" when none).
func (a *Agent) ModelFor(conn *providers.Connection) string {
	if sess, err := a.app.Session(conn); err == nil {
		if m := sess.Settings().Model; m != "" {
			return m
		}
	}
	return a.opts.Settings.Model
}

// Client builds the model client for "provider:model". A hosted provider
// without a key is refused here, before any request, with the variables
// that would supply one.
func (a *Agent) Client(spec string) (model.Client, error) {
	cfg, err := a.opts.Settings.ModelConfig(spec)
	if err != nil {
		return nil, err
	}
	if err := a.opts.Settings.checkKey(cfg); err != nil {
		return nil, err
	}
	return a.opts.NewClient(cfg)
}

// checkModel reports whether spec names a model a client can be built
// for, keys aside: ,model may name one whose key arrives later.
func (a *Agent) checkModel(spec string) error {
	cfg, err := a.opts.Settings.ModelConfig(spec)
	if err == nil {
		_, err = a.opts.NewClient(cfg)
	}
	return err
}

// Run runs one turn: it calls the model until a reply has no tool calls,
// or the step limit is reached. Every step is on the session's tape when
// Run returns, whatever the outcome; on failure the partial Result is
// returned with the error.
func (a *Agent) Run(ctx context.Context, t *Turn) (*Result, error) {
	sink := &errorTracker{sink: t.Sink}
	if sink.sink == nil {
		sink.sink = discard{}
	}
	res, err := a.run(ctx, t, sink)
	if err != nil && !sink.reported {
		sink.Emit(Event{Kind: EventError, Error: err.Error()})
	}
	return res, err
}

// errorTracker remembers whether a turn reported its failure, so Run
// reports the early ones (no model, empty prompt) exactly once.
type errorTracker struct {
	sink     Sink
	reported bool
}

func (e *errorTracker) Emit(ev Event) {
	if ev.Kind == EventError {
		e.reported = true
	}
	e.sink.Emit(ev)
}

func (a *Agent) run(ctx context.Context, t *Turn, sink Sink) (*Result, error) {
	if t.Conn == nil {
		return nil, errors.New("agent: Turn.Conn is required")
	}
	conn := *t.Conn
	if err := a.app.Resolve(ctx, &conn); err != nil {
		return nil, err
	}
	// state["code_mode"] switches code mode for this turn only.
	if err := app.ApplyState(&conn, t.State); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	res := &Result{SessionID: conn.SessionKey, ToolCalls: []CallRecord{}}
	if strings.TrimSpace(t.Prompt) == "" {
		return res, errors.New("agent: empty prompt")
	}
	sess, err := a.app.Session(&conn)
	if err != nil {
		return res, err
	}
	tape := sess.Tape()
	if err := sess.EnsureBootstrap(); err != nil {
		return res, fmt.Errorf("agent: %w", err)
	}
	spec := t.Model
	if spec == "" {
		spec = a.ModelFor(&conn)
	}
	if spec == "" {
		return res, ErrNoModel
	}
	res.Model = spec
	effort := t.ReasoningEffort
	if effort == "" {
		effort = sess.Settings().ReasoningEffort
	}
	client, err := a.Client(spec)
	if err != nil {
		return res, fmt.Errorf("agent: %w", err)
	}

	view, tools, err := a.tools(ctx, &conn, t.AllowedTools)
	if err != nil {
		return res, err
	}
	system := a.systemPrompt(ctx, &conn, view, t)
	specs := make([]model.Tool, len(tools))
	for i, tl := range tools {
		specs[i] = model.Tool{Name: tl.ModelName(), Description: tl.Description, Parameters: tl.InputSchema}
	}
	// The turn's tools share state: subagent reads the model, the skill
	// tool the allowed skills.
	state := maps.Clone(t.State)
	if state == nil {
		state = map[string]any{}
	}
	state[StateModel] = spec
	if t.AllowedSkills != nil {
		lower := make([]string, len(t.AllowedSkills))
		for i, s := range t.AllowedSkills {
			lower[i] = strings.ToLower(s)
		}
		state["allowed_skills"] = lower
	}

	a.event(tape, "loop.start", map[string]any{"model": spec, "prompt": t.Prompt, "allowed_skills": nilIfEmpty(t.AllowedSkills), "allowed_tools": nilIfEmpty(t.AllowedTools)})
	prompt := t.Prompt
	handoffs := 1
	maxSteps := a.opts.Settings.MaxSteps
	for step := 1; step <= maxSteps; step++ {
		res.Steps = step
		start := time.Now()
		a.event(tape, "loop.step.start", map[string]any{"step": step, "prompt": prompt})
		sink.Emit(Event{Kind: EventStep, Step: step})
		runID := newRunID()
		meta := map[string]any{"run_id": runID}
		user := model.Message{Role: "user", Content: prompt}
		msgs := append([]model.Message{{Role: "system", Content: system}}, Messages(tape.ContextEntries())...)
		msgs = append(msgs, user)
		reply, err := a.callModel(ctx, &llmCall{runID: runID, spec: spec, client: client, msgs: msgs, specs: specs, effort: effort, step: step}, sink)
		// endStep records the step's loop.step event; errText is set for
		// the statuses that carry an error.
		endStep := func(status, errText string) {
			data := map[string]any{"step": step, "elapsed_ms": time.Since(start).Milliseconds(), "status": status, "date": now()}
			if errText != "" {
				data["error"] = errText
			}
			a.event(tape, "loop.step", data)
		}
		// recordPrompt records the step's system prompt and user message.
		recordPrompt := func() {
			a.append(tape, sessions.KindSystem, map[string]any{"content": system}, meta)
			a.append(tape, sessions.KindMessage, map[string]any{"role": "user", "content": prompt}, meta)
		}
		if err != nil {
			if ctx.Err() == nil && handoffs > 0 && model.IsContextLength(err) {
				handoffs--
				a.handoff(tape, err)
				endStep("auto_handoff", err.Error())
				sink.Emit(Event{Kind: EventHandoff, Step: step, Error: err.Error()})
				prompt = t.Prompt
				continue
			}
			if ctx.Err() != nil {
				// Cancelled (Ctrl-C in the REPL): the prompt and what the
				// model streamed so far stay on the tape, so the next turn
				// knows what was asked and already answered.
				recordPrompt()
				var cut *interrupted
				if errors.As(err, &cut) && cut.text != "" {
					res.Text = cut.text
					a.append(tape, sessions.KindMessage, map[string]any{"role": "assistant", "content": cut.text}, map[string]any{"run_id": runID, "interrupted": true})
				}
				a.event(tape, "run", map[string]any{"status": "cancelled", "model": spec}, meta)
				endStep("error", "cancelled")
				sink.Emit(Event{Kind: EventError, Step: step, Error: "cancelled"})
				return res, err
			}
			a.append(tape, sessions.KindError, map[string]any{"kind": "provider", "message": err.Error()}, meta)
			a.event(tape, "run", map[string]any{"status": "error", "model": spec}, meta)
			endStep("error", err.Error())
			sink.Emit(Event{Kind: EventError, Step: step, Error: err.Error()})
			return res, err
		}
		runData := map[string]any{"status": "ok", "model": spec}
		if reply.Usage != nil {
			res.Usage = res.Usage.Add(*reply.Usage)
			runData["usage"] = reply.Usage.Map()
			u := *reply.Usage
			sink.Emit(Event{Kind: EventUsage, Step: step, Usage: &u})
		}
		if len(reply.ToolCalls) == 0 {
			recordPrompt()
			a.append(tape, sessions.KindMessage, map[string]any{"role": "assistant", "content": reply.Text}, meta)
			a.event(tape, "run", runData, meta)
			endStep("ok", "")
			res.Text = reply.Text
			u := res.Usage
			sink.Emit(Event{Kind: EventFinal, Step: step, Text: reply.Text, Usage: &u})
			return res, nil
		}

		sink.Emit(Event{Kind: EventToolCall, Step: step, ToolCalls: reply.ToolCalls})
		results := a.runTools(ctx, &conn, tools, reply.ToolCalls, app.Request{Peer: t.Peer, RunID: runID, State: state, EnvSession: t.EnvSession})
		sink.Emit(Event{Kind: EventToolResult, Step: step, Results: results})
		calls := make([]any, len(reply.ToolCalls))
		outputs := make([]any, len(results))
		for i, c := range reply.ToolCalls {
			calls[i] = map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
			outputs[i] = results[i].Output
			res.ToolCalls = append(res.ToolCalls, CallRecord{Name: c.Name, Arguments: c.Arguments, Status: results[i].Status})
		}
		callPayload := map[string]any{"calls": calls}
		if reply.Text != "" {
			callPayload["content"] = reply.Text
		}
		recordPrompt()
		a.append(tape, sessions.KindToolCall, callPayload, meta)
		a.append(tape, sessions.KindToolResult, map[string]any{"results": outputs}, meta)
		a.event(tape, "run", runData, meta)
		if err := ctx.Err(); err != nil {
			endStep("error", "cancelled")
			sink.Emit(Event{Kind: EventError, Step: step, Error: "cancelled"})
			return res, err
		}
		endStep("continue", "")
		prompt = ContinuePrompt
	}
	err = fmt.Errorf("agent: max_steps_reached=%d: the model was still calling tools after %d steps; raise BUB_MAX_STEPS or [agent] max_steps to let it go on: %w", maxSteps, maxSteps, ErrMaxSteps)
	a.append(tape, sessions.KindError, map[string]any{"kind": "tool", "message": fmt.Sprintf("max_steps_reached=%d", maxSteps)}, nil)
	sink.Emit(Event{Kind: EventError, Step: maxSteps, Error: err.Error()})
	return res, err
}

func nilIfEmpty(s []string) any {
	if s == nil {
		return nil
	}
	return s
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func newRunID() string {
	return "run-" + time.Now().UTC().Format("20060102T150405.000000Z") + "-" + randomHex(4)
}

func modelID(spec string) string {
	_, id, _ := model.Split(spec)
	return id
}

// append writes an entry; a tape failure is logged, never fatal: the turn
// has already happened.
func (a *Agent) append(tape *sessions.Tape, kind string, payload, meta map[string]any) {
	if _, err := tape.Append(kind, payload, meta); err != nil {
		a.log.Warn("agent.tape.append", "kind", kind, "error", err)
	}
}

func (a *Agent) event(tape *sessions.Tape, name string, data map[string]any, meta ...map[string]any) {
	var m map[string]any
	if len(meta) > 0 {
		m = meta[0]
	}
	if _, err := tape.AppendEvent(name, data, m); err != nil {
		a.log.Warn("agent.tape.event", "name", name, "error", err)
	}
}

// handoff records Bub's automatic handoff after a context-length error:
// an anchor auto_handoff/context_overflow and its handoff event.
func (a *Agent) handoff(tape *sessions.Tape, cause error) {
	const name = "auto_handoff/context_overflow"
	state := map[string]any{"reason": "context_length_exceeded", "error": cause.Error()}
	a.append(tape, sessions.KindAnchor, map[string]any{"name": name, "state": state}, nil)
	a.event(tape, sessions.EventHandoff, map[string]any{"name": name, "state": state})
}

// llmCall is one model call of a step, before the LLM hooks.
type llmCall struct {
	runID, spec, effort string
	client              model.Client
	msgs                []model.Message
	specs               []model.Tool
	step                int
}

// callModel runs the before_llm_call hooks, then the model (unless a hook
// finished the step: its text is the reply), then the after_llm_call
// hooks.
func (a *Agent) callModel(ctx context.Context, c *llmCall, sink Sink) (*model.Reply, error) {
	if len(a.llmHooks()) == 0 {
		req := &model.Request{Model: modelID(c.spec), Messages: c.msgs, Tools: c.specs, MaxTokens: a.opts.Settings.MaxTokens, ReasoningEffort: c.effort}
		return a.complete(ctx, c.client, req, c.step, sink)
	}
	hreq := &LLMCallRequest{RunID: c.runID, Model: c.spec, Messages: c.msgs, MaxTokens: a.opts.Settings.MaxTokens}
	for _, s := range c.specs {
		hreq.ToolNames = append(hreq.ToolNames, s.Name)
	}
	if text, done := a.beforeLLM(ctx, hreq); done {
		if text != "" {
			sink.Emit(Event{Kind: EventText, Step: c.step, Delta: text})
		}
		return &model.Reply{Text: text, StopReason: "hook"}, nil
	}
	client := c.client
	if hreq.Model != c.spec {
		var err error
		if client, err = a.Client(hreq.Model); err != nil {
			return nil, fmt.Errorf("agent: before_llm_call hook chose model %q: %w", hreq.Model, err)
		}
	}
	var specs []model.Tool
	for _, s := range c.specs {
		if slices.Contains(hreq.ToolNames, s.Name) {
			specs = append(specs, s)
		}
	}
	req := &model.Request{Model: modelID(hreq.Model), Messages: hreq.Messages, Tools: specs, MaxTokens: hreq.MaxTokens, ReasoningEffort: c.effort}
	reply, err := a.complete(ctx, client, req, c.step, sink)
	a.afterLLM(ctx, hreq, reply, err)
	return reply, err
}

// complete calls the model, streaming deltas to sink, retrying network
// failures, timeouts, 429 and 5xx with exponential backoff. Each attempt
// is bounded by the settings' timeout.
func (a *Agent) complete(ctx context.Context, client model.Client, req *model.Request, step int, sink Sink) (*model.Reply, error) {
	timeout := a.opts.Settings.Timeout
	var last error
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, timeout)
		seq, err := client.Stream(actx, req)
		var reply *model.Reply
		var streamed strings.Builder // this attempt's text so far
		if err == nil {
			reply, err = model.Collect(seq, func(ev model.Event) {
				if ev.Text != "" {
					streamed.WriteString(ev.Text)
					sink.Emit(Event{Kind: EventText, Step: step, Delta: ev.Text})
				}
				if ev.Reasoning != "" {
					sink.Emit(Event{Kind: EventReasoning, Step: step, Delta: ev.Reasoning})
				}
			})
		}
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil {
			return reply, nil
		}
		if ctx.Err() != nil {
			return nil, &interrupted{text: streamed.String(), err: ctx.Err()}
		}
		if timedOut {
			err = &model.Error{Message: fmt.Sprintf("no complete reply within %s (BUB_MODEL_TIMEOUT_SECONDS)", timeout), Retryable: true, Err: err}
		}
		last = err
		if !model.IsRetryable(err) || attempt >= a.opts.Attempts {
			break
		}
		wait := a.opts.Backoff << (attempt - 1)
		sink.Emit(Event{Kind: EventRetry, Step: step, Attempt: attempt, Error: err.Error()})
		a.log.Warn("agent.model.retry", "attempt", attempt, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	if a.opts.Attempts > 1 && model.IsRetryable(last) {
		return nil, fmt.Errorf("agent: model call failed after %d attempts: %w", a.opts.Attempts, last)
	}
	if me := (*model.Error)(nil); errors.As(last, &me) && me.StatusCode == http.StatusUnauthorized && me.Provider != "" {
		// The server's words ("bad key", "Unauthorized") do not say
		// which of the places a key is read from held this one.
		return nil, fmt.Errorf("agent: model call failed: %w (the server refused the API key: check %s)", last, keySources(me.Provider))
	}
	return nil, fmt.Errorf("agent: model call failed: %w", last)
}

// interrupted is a model call cancelled (Ctrl-C) while it streamed; text
// is what the person already saw, which the tape keeps.
type interrupted struct {
	text string
	err  error
}

func (e *interrupted) Error() string { return e.err.Error() }
func (e *interrupted) Unwrap() error { return e.err }

// tools returns the View and the tools the model gets: the View's direct
// tools, restricted to allowed when set (a restricted turn without
// run_code falls back from code mode, as Bub's subagents do).
func (a *Agent) tools(ctx context.Context, conn *providers.Connection, allowed []string) (*providers.View, []*registry.Tool, error) {
	if allowed != nil && conn.CodeMode && !matchesAny(allowed, "run_code") {
		conn.CodeMode = false
	}
	view, err := a.app.View(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	if allowed == nil {
		return view, view.Tools, nil
	}
	var out []*registry.Tool
	for _, t := range view.Tools {
		if matchesAny(allowed, t.Name) {
			out = append(out, t)
		}
	}
	return view, out, nil
}

func matchesAny(names []string, tool string) bool {
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == strings.ToLower(tool) || n == strings.ToLower(registry.ModelName(tool)) {
			return true
		}
	}
	return false
}

// systemPrompt joins the guidance, the workspace's AGENTS.md, the View's
// instructions (code mode's fragment, providers' prompts) and the skills.
func (a *Agent) systemPrompt(ctx context.Context, conn *providers.Connection, view *providers.View, t *Turn) string {
	parts := []string{a.opts.SystemPrompt}
	if conn.Workspace != "" {
		parts = append(parts, "Workspace: "+conn.Workspace)
		if b, err := os.ReadFile(filepath.Join(conn.Workspace, "AGENTS.md")); err == nil && len(b) > 0 {
			if len(b) > 32<<10 {
				b = b[:32<<10]
			}
			parts = append(parts, "<workspace_instructions>\n"+strings.TrimSpace(string(b))+"\n</workspace_instructions>")
		}
	}
	if view.Instructions != "" {
		parts = append(parts, view.Instructions)
	}
	if _, ok := view.Lookup("skill"); ok {
		if sp := a.skillsPrompt(ctx, conn, t); sp != "" {
			parts = append(parts, sp)
		}
	}
	return strings.Join(parts, "\n\n")
}

// skillsPrompt lists the skills the turn may use (t.AllowedSkills when
// set), with the bodies of those its prompt names as $name inlined, as
// Bub's agent does. It discovers them through the App's skills module when
// there is one (as there is wherever the skill tool is), which warns
// about a legacy directory once rather than every turn and applies the
// profile's confinement; $PYTHON names the interpreter of the turn's
// Environment.
func (a *Agent) skillsPrompt(ctx context.Context, conn *providers.Connection, t *Turn) string {
	sm := &skills.Module{}
	if m, ok := a.app.Module("skills"); ok {
		if found, ok := m.(*skills.Module); ok {
			sm = found
		}
	}
	python := ""
	envConn := *conn
	if t.EnvSession != "" {
		envConn.SessionKey = t.EnvSession
	}
	if env, err := a.app.Environment(ctx, &envConn); err == nil {
		python = environment.PythonOf(env)
	}
	return sm.PromptFor(conn, t.Prompt, t.AllowedSkills, python)
}

// invalidArguments is the error a model gets for arguments that are not a
// JSON object; it can correct them on its next step.
func invalidArguments(raw string, err error) *registry.Error {
	d := map[string]any{"arguments": raw}
	if err != nil {
		d["error"] = err.Error()
	}
	return registry.NewError(registry.KindInvalidInput, "Expected a function tool call with JSON object arguments.", d)
}

// unknownTool is Bub's answer to a call of a tool that does not exist.
func unknownTool(name string, tools []*registry.Tool) string {
	names := make([]string, 0, len(tools))
	hasSkill := false
	for _, t := range tools {
		names = append(names, t.ModelName())
		if t.Name == "skill" {
			hasSkill = true
		}
	}
	msg := "Tool `" + name + "` does not exist."
	if m := textmatch.CloseMatches(name, names, 3, 0.6); len(m) > 0 {
		return msg + " Did you mean one of the following?\n- " + strings.Join(m, "\n- ")
	}
	if hasSkill {
		return msg + " Invoke the `skill` tool to list available skills."
	}
	return msg + " No similar tool is available."
}

// runTools runs a step's calls concurrently, at most MaxToolConcurrency at
// a time, through the App, and returns the results in call order. Each
// call is base with its tool and arguments; it is left off the audit
// trail, since the turn records each step as one tool_call/tool_result
// pair with the model's call ids, as Bub does, and an audit pair per call
// would show the model every call twice.
func (a *Agent) runTools(ctx context.Context, conn *providers.Connection, tools []*registry.Tool, calls []model.ToolCall, base app.Request) []ToolResult {
	byName := map[string]*registry.Tool{}
	for _, t := range tools {
		byName[strings.ToLower(t.ModelName())] = t
		byName[strings.ToLower(t.Name)] = t
	}
	out := make([]ToolResult, len(calls))
	var sem chan struct{}
	if n := a.opts.MaxToolConcurrency; n > 0 {
		sem = make(chan struct{}, n)
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		out[i] = ToolResult{ID: c.ID, Name: c.Name, Status: "error"}
		tool, ok := byName[strings.ToLower(strings.TrimSpace(c.Name))]
		if !ok {
			out[i].Output = unknownTool(c.Name, tools)
			continue
		}
		raw := strings.TrimSpace(c.Arguments)
		if raw == "" {
			raw = "{}"
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj == nil {
			out[i].Output = invalidArguments(c.Arguments, err).JSON()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sem != nil {
				select {
				case sem <- struct{}{}:
					defer func() { <-sem }()
				case <-ctx.Done():
					out[i].Output = (&registry.Error{Kind: registry.KindTool, Message: fmt.Sprintf("Tool '%s' call was cancelled.", tool.Name)}).JSON()
					return
				}
			}
			req := base
			req.Tool, req.Args, req.NoAudit = tool.Name, json.RawMessage(raw), true
			r := a.app.Call(ctx, conn, req)
			out[i].Output = r.Output()
			out[i].ElapsedMS = r.Duration.Milliseconds()
			if r.Err == nil {
				out[i].Status = "ok"
			}
		}()
	}
	wg.Wait()
	return out
}
