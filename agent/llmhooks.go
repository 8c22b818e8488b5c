package agent

import (
	"context"
	"log/slog"
	"slices"

	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/bubbuild/bub-mcp/app"
)

// LLMCallRequest is one model call of a turn as LLM hooks see it (Bub's
// LlmCallRequest). A before hook may change any field: the call is made
// with what the last hook left.
type LLMCallRequest struct {
	// RunID is the step's run id, as on its tape entries.
	RunID string
	// Model is "provider:model"; a hook may switch it.
	Model string
	// Messages start with the system message.
	Messages []model.Message
	// ToolNames are the model-facing names of the tools sent; removing
	// one withholds it from this call.
	ToolNames []string
	// MaxTokens caps the reply.
	MaxTokens int
}

// LLMDecision is a before hook's verdict; the zero value makes the call.
type LLMDecision struct {
	finish bool
	text   string
}

// Finish ends the step without calling the model: text becomes the reply,
// as Bub's LlmCallDecision.finish does (a cache, a guard that answers
// itself).
func Finish(text string) LLMDecision { return LLMDecision{finish: true, text: text} }

// LLMHooks observe and steer a turn's model calls, as Bub's
// before_llm_call and after_llm_call do. Either function may be nil. A
// hook that panics is logged and skipped.
type LLMHooks struct {
	// Name identifies the hook in logs.
	Name string
	// Before runs before each model call; it may rewrite req in place or
	// finish the step. The first Finish stops the chain.
	Before func(ctx context.Context, req *LLMCallRequest) LLMDecision
	// After sees each model call's outcome (the reply, or the error after
	// the last attempt); it cannot change them.
	After func(ctx context.Context, req *LLMCallRequest, reply *model.Reply, err error)
}

// LLMHooker is implemented by modules that contribute LLM hooks; the
// agent collects them from the App's modules on its first model call,
// when every module is loaded, whatever their IDs.
type LLMHooker interface {
	LLMHooks() []LLMHooks
}

// collectLLMHooks returns the hooks of opts and of a's modules in running
// order: as with tool hooks (pluggy), the last registered runs first, so
// modules (loaded first) run after the SDK caller's.
func collectLLMHooks(a *app.App, opts []LLMHooks) []LLMHooks {
	var hooks []LLMHooks
	for _, m := range a.Modules() {
		if h, ok := m.(LLMHooker); ok {
			hooks = append(hooks, h.LLMHooks()...)
		}
	}
	hooks = append(hooks, opts...)
	slices.Reverse(hooks)
	return hooks
}

// beforeLLM runs the before hooks; finished reports a Finish, with its
// text.
func (a *Agent) beforeLLM(ctx context.Context, req *LLMCallRequest) (text string, finished bool) {
	hooks := a.llmHooks()
	for i := range hooks {
		h := &hooks[i]
		if h.Before == nil {
			continue
		}
		d, ok := a.runLLMBefore(ctx, h, req)
		if ok && d.finish {
			return d.text, true
		}
	}
	return "", false
}

func (a *Agent) runLLMBefore(ctx context.Context, h *LLMHooks, req *LLMCallRequest) (d LLMDecision, ok bool) {
	saved := *req
	saved.Messages = slices.Clone(req.Messages)
	saved.ToolNames = slices.Clone(req.ToolNames)
	defer func() {
		if p := recover(); p != nil {
			*req = saved // a half-done rewrite is no rewrite
			a.log.LogAttrs(ctx, slog.LevelError, "agent.llm_hook.panic", slog.String("hook", h.Name), slog.String("stage", "before"), slog.Any("panic", p))
			ok = false
		}
	}()
	return h.Before(ctx, req), true
}

// afterLLM runs the after hooks.
func (a *Agent) afterLLM(ctx context.Context, req *LLMCallRequest, reply *model.Reply, err error) {
	hooks := a.llmHooks()
	for i := range hooks {
		h := &hooks[i]
		if h.After == nil {
			continue
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					a.log.LogAttrs(ctx, slog.LevelError, "agent.llm_hook.panic", slog.String("hook", h.Name), slog.String("stage", "after"), slog.Any("panic", p))
				}
			}()
			h.After(ctx, req, reply, err)
		}()
	}
}
