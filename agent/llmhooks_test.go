package agent_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/fakemodel"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// TestLLMHooks: before_llm_call rewrites the request (a message added, a
// tool withheld) or finishes the step with its own text, without calling
// the model; after_llm_call sees each call's reply; a panicking hook is
// skipped; hooks run last registered first.
func TestLLMHooks(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t, fakemodel.Reply{Text: "from the model", PromptTokens: 7, CompletionTokens: 3}))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	var (
		mu    sync.Mutex
		order []string
		seen  []string
	)
	log := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	hooks := []agent.LLMHooks{
		{Name: "rewrite", Before: func(ctx context.Context, req *agent.LLMCallRequest) agent.LLMDecision {
			log("rewrite")
			req.Messages = append(req.Messages, model.Message{Role: "user", Content: "Answer in one line."})
			req.ToolNames = slicesWithout(req.ToolNames, "bash")
			return agent.LLMDecision{}
		}, After: func(ctx context.Context, req *agent.LLMCallRequest, reply *model.Reply, err error) {
			mu.Lock()
			seen = append(seen, reply.Text)
			mu.Unlock()
		}},
		{Name: "cache", Before: func(ctx context.Context, req *agent.LLMCallRequest) agent.LLMDecision {
			log("cache")
			if last := req.Messages[len(req.Messages)-1]; last.Content == "cached question" {
				return agent.Finish("cached answer")
			}
			return agent.LLMDecision{}
		}},
		{Name: "broken", Before: func(ctx context.Context, req *agent.LLMCallRequest) agent.LLMDecision {
			log("broken")
			req.Messages = nil
			panic("hook bug")
		}},
	}
	a := f.mod.Configure(&agent.Options{Settings: f.agent.Settings(), SystemPrompt: testSystem, Backoff: 5 * time.Millisecond, LLMHooks: hooks})

	res, err := a.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "cached question"})
	if err != nil || res.Text != "cached answer" {
		t.Fatalf("finished turn = %+v, %v; want the hook's text", res, err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the model got %d requests; the hook finished the step", n)
	}
	res, err = a.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "a real question"})
	if err != nil || res.Text != "from the model" {
		t.Fatalf("turn = %+v, %v", res, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests; want 1", len(reqs))
	}
	msgs := fakemodel.OpenAIMessages(reqs[0])
	if last := msgs[len(msgs)-1]; last.Content != "Answer in one line." {
		t.Errorf("last message sent = %+v; want the hook's", last)
	}
	if names := fakemodel.ToolNames(reqs[0]); contains(names, "bash") || !contains(names, "fs_read") {
		t.Errorf("tools sent = %v; want bash withheld, the others kept", names)
	}
	if diff := cmp.Diff([]string{"broken", "cache", "broken", "cache", "rewrite"}, order); diff != "" {
		t.Errorf("hook order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"from the model"}, seen); diff != "" {
		t.Errorf("after_llm_call saw (-want +got):\n%s", diff)
	}
	// The finished step is on the tape as an answer.
	var answers []string
	for _, e := range f.tape().Entries() {
		if e.Payload["role"] == "assistant" {
			answers = append(answers, e.Payload["content"].(string))
		}
	}
	if diff := cmp.Diff([]string{"cached answer", "from the model"}, answers); diff != "" {
		t.Errorf("assistant messages on the tape (-want +got):\n%s", diff)
	}
}

func slicesWithout(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if !strings.EqualFold(s, drop) {
			out = append(out, s)
		}
	}
	return out
}

// llmHookModule contributes an LLM hook as a module, found by the agent
// through agent.LLMHooker.
type llmHookModule struct{ calls *int }

var llmHookCalls int

func (llmHookModule) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "test.llmhook", New: func() app.Module { return llmHookModule{calls: &llmHookCalls} }}
}

func (m llmHookModule) LLMHooks() []agent.LLMHooks {
	return []agent.LLMHooks{{Name: "count", Before: func(ctx context.Context, req *agent.LLMCallRequest) agent.LLMDecision {
		*m.calls++
		return agent.Finish("module says hi to " + req.Model)
	}}}
}

func init() { app.RegisterModule(llmHookModule{}) }

func TestLLMHooksFromModules(t *testing.T) {
	cfg, err := config.Parse("test.toml", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{"agent", "test.llmhook"}, Home: t.TempDir(), Workspace: t.TempDir(),
		Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	m, err := agent.FromApp(a)
	if err != nil {
		t.Fatal(err)
	}
	ag := m.Configure(&agent.Options{Settings: agent.Settings{Model: "openai:never-called", APIKey: "k", APIBase: "http://127.0.0.1:1/v1"}})
	conn := &providers.Connection{Transport: "agent"}
	if err := a.Resolve(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	res, err := ag.Run(t.Context(), &agent.Turn{Conn: conn, Prompt: "hello"})
	if err != nil || res.Text != "module says hi to openai:never-called" || llmHookCalls != 1 {
		t.Errorf("turn = %+v, %v after %d hook calls; want the module hook's answer", res, err, llmHookCalls)
	}
}

// lateHookModule's ID sorts after "agent", so the App provisions it after
// the agent module has built its Agent.
type lateHookModule struct{}

func (lateHookModule) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "zz.hooks", New: func() app.Module { return lateHookModule{} }}
}

func (lateHookModule) LLMHooks() []agent.LLMHooks {
	return []agent.LLMHooks{{Name: "late", Before: func(ctx context.Context, req *agent.LLMCallRequest) agent.LLMDecision {
		return agent.Finish("late module answers")
	}}}
}

func init() { app.RegisterModule(lateHookModule{}) }

// TestLLMHooksFromLaterModule: a module loaded after the agent module
// (ID "zz.hooks", as App.Modules sorts them) still steers the model calls
// of the Agent the module built in Provision, not only one made later
// with Configure.
func TestLLMHooksFromLaterModule(t *testing.T) {
	env := map[string]string{"BUB_MODEL": "openai:never-called", "BUB_API_KEY": "k", "BUB_API_BASE": "http://127.0.0.1:1/v1"}
	for _, modules := range [][]string{{"agent", "zz.hooks"}, {"zz.hooks", "agent"}} {
		a, err := newApp(t, "", env, modules)
		if err != nil {
			t.Fatal(err)
		}
		m, err := agent.FromApp(a)
		if err != nil {
			t.Fatal(err)
		}
		conn := &providers.Connection{Transport: "agent"}
		if err := a.Resolve(t.Context(), conn); err != nil {
			t.Fatal(err)
		}
		res, err := m.Agent().Run(t.Context(), &agent.Turn{Conn: conn, Prompt: "hello"})
		if err != nil || res.Text != "late module answers" {
			t.Errorf("modules %v: turn = %+v, %v; want the zz.hooks module's answer", modules, res, err)
		}
	}
}
