package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/internal/fakemodel"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/google/go-cmp/cmp"
)

type msg = fakemodel.ChatMessage
type call = fakemodel.Call

// TestTurnOpenAI checks the exact messages the model receives at every
// step, the streamed events, the result and the tape afterwards.
func TestTurnOpenAI(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Text: "Writing it.", Calls: []call{{ID: "call_w", Name: "fs_write", Arguments: `{"path":"a.txt","content":"hi there"}`}}, PromptTokens: 100, CompletionTokens: 20, CachedTokens: 40},
		fakemodel.Reply{Calls: []call{{ID: "call_r", Name: "fs_read", Arguments: `{"path":"a.txt"}`}}},
		fakemodel.Reply{Text: "The file says hi there."},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	rec := &recorder{}
	res, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "write a.txt then read it", Sink: rec})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "The file says hi there." || res.Steps != 3 {
		t.Errorf("result = %+v", res)
	}
	if got, _ := os.ReadFile(f.path("a.txt")); string(got) != "hi there" {
		t.Errorf("a.txt = %q", got)
	}
	sys := msg{Role: "system", Content: f.system()}
	user := msg{Role: "user", Content: "write a.txt then read it"}
	step1 := []msg{
		{Role: "assistant", Content: "Writing it.", ToolCalls: []call{{ID: "call_w", Name: "fs_write", Arguments: `{"path":"a.txt","content":"hi there"}`}}},
		{Role: "tool", Content: "wrote: " + f.path("a.txt"), ToolCallID: "call_w"},
	}
	step2 := []msg{
		{Role: "assistant", ToolCalls: []call{{ID: "call_r", Name: "fs_read", Arguments: `{"path":"a.txt"}`}}},
		{Role: "tool", Content: "hi there", ToolCallID: "call_r"},
	}
	cont := msg{Role: "user", Content: agent.ContinuePrompt}
	want := [][]msg{
		{sys, user},
		append(append([]msg{sys, user}, step1...), cont),
		append(append(append(append([]msg{sys, user}, step1...), cont), step2...), cont),
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests; want 3", len(reqs))
	}
	for i, r := range reqs {
		if diff := cmp.Diff(want[i], fakemodel.OpenAIMessages(r)); diff != "" {
			t.Errorf("request %d messages (-want +got):\n%s", i+1, diff)
		}
		if r["model"] != "fake-model" || r["stream"] != true {
			t.Errorf("request %d: model %v stream %v", i+1, r["model"], r["stream"])
		}
	}
	if diff := cmp.Diff([]string{"bash", "fs_read", "fs_write", "pair", "slow", "subagent", "tape_handoff", "tape_info", "tape_search"}, fakemodel.ToolNames(reqs[0])); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	wantKinds := []agent.EventKind{
		agent.EventStep, agent.EventText, agent.EventUsage, agent.EventToolCall, agent.EventToolResult,
		agent.EventStep, agent.EventUsage, agent.EventToolCall, agent.EventToolResult,
		agent.EventStep, agent.EventText, agent.EventUsage, agent.EventFinal,
	}
	if diff := cmp.Diff(wantKinds, rec.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if n := rec.count(agent.EventText); n < 4 {
		t.Errorf("%d text deltas; want the text streamed in pieces", n)
	}
	if res.Usage.TotalTokens != 120+15+15 || res.Usage.CachedTokens != 40 {
		t.Errorf("usage = %+v", res.Usage)
	}

	// The tape, as spec §7 has it.
	wantTape := []string{"anchor:session/start", "event:handoff", "event:loop.start"}
	stepTools := []string{"event:loop.step.start", "system", "message", "tool_call", "tool_result", "event:run", "event:loop.step"}
	wantTape = append(wantTape, stepTools...)
	wantTape = append(wantTape, stepTools...)
	wantTape = append(wantTape, "event:loop.step.start", "system", "message", "message", "event:run", "event:loop.step")
	entries := f.tape().Entries()
	if diff := cmp.Diff(wantTape, entryKinds(entries)); diff != "" {
		t.Errorf("tape (-want +got):\n%s", diff)
	}
	var calls, results, run map[string]any
	for _, e := range entries {
		switch {
		case e.Kind == sessions.KindToolCall && calls == nil:
			calls = e.Payload
		case e.Kind == sessions.KindToolResult && results == nil:
			results = e.Payload
		case e.Kind == sessions.KindEvent && e.Payload["name"] == "run" && run == nil:
			run = e.Payload["data"].(map[string]any)
		}
		if (e.Kind == sessions.KindToolCall || e.Kind == sessions.KindMessage) && e.Meta["run_id"] == nil {
			t.Errorf("entry %d (%s) has no run_id", e.ID, e.Kind)
		}
	}
	wantCalls := map[string]any{"content": "Writing it.", "calls": []any{map[string]any{"id": "call_w", "type": "function",
		"function": map[string]any{"name": "fs_write", "arguments": `{"path":"a.txt","content":"hi there"}`}}}}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("tool_call payload (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"results": []any{"wrote: " + f.path("a.txt")}}, results); diff != "" {
		t.Errorf("tool_result payload (-want +got):\n%s", diff)
	}
	if run["status"] != "ok" || run["model"] != "openai:fake-model" {
		t.Errorf("run event = %v", run)
	}
	info := f.tape().Info()
	if info.LastTokenUsage == nil || *info.LastTokenUsage != 15 {
		t.Errorf("tape.info last_token_usage = %v", info.LastTokenUsage)
	}

	// A second turn continues from the tape.
	srv2 := fakemodel.NewOpenAI(t, fakemodel.Replies(t, fakemodel.Reply{Text: "Yes."}))
	f2 := f.withServer(t, srv2.URL)
	if _, err := f2.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "still there?"}); err != nil {
		t.Fatal(err)
	}
	got := fakemodel.OpenAIMessages(srv2.Requests()[0])
	wantNext := append(append(append(append([]msg{sys, user}, step1...), cont), step2...), cont,
		msg{Role: "assistant", Content: "The file says hi there."}, msg{Role: "user", Content: "still there?"})
	if diff := cmp.Diff(wantNext, got); diff != "" {
		t.Errorf("second turn messages (-want +got):\n%s", diff)
	}

	// tape.search and tape.info work on the agent's session.
	out, err := f.agent.Command(t.Context(), f.conn, "tape.search query='hi there'")
	if err != nil || !strings.Contains(out, "[tape.search]: ") || !strings.Contains(out, "hi there") {
		t.Errorf(",tape.search = %q, %v", out, err)
	}
	out, err = f.agent.Command(t.Context(), f.conn, "tape.info")
	if err != nil || !strings.Contains(out, "last_token_usage: 15") {
		t.Errorf(",tape.info = %q, %v", out, err)
	}
}

// withServer returns an agent over the same App talking to another
// fake server.
func (f *fixture) withServer(t *testing.T, url string) *agent.Agent {
	s := f.agent.Settings()
	s.APIBase = url + "/v1"
	return agent.New(f.app, &agent.Options{Settings: s, SystemPrompt: testSystem})
}

func TestParallelCalls(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []call{{Name: "pair", Arguments: `{"id":"a"}`}, {Name: "pair", Arguments: `{"id":"b"}`}}},
		fakemodel.Reply{Text: "both paired"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	rec := &recorder{}
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "pair up", Sink: rec}); err != nil {
		t.Fatal(err)
	}
	var results []agent.ToolResult
	for _, e := range rec.events {
		if e.Kind == agent.EventToolResult {
			results = e.Results
		}
	}
	got := []string{results[0].Output, results[1].Output}
	if diff := cmp.Diff([]string{"paired a", "paired b"}, got); diff != "" {
		t.Errorf("results in call order (-want +got):\n%s", diff)
	}
	tools := fakemodel.OpenAIMessages(srv.Requests()[1])
	if tools[3].ToolCallID != "call_1" || tools[4].ToolCallID != "call_2" || tools[3].Content != "paired a" {
		t.Errorf("tool messages = %+v", tools[3:5])
	}
}

func TestConcurrencyLimit(t *testing.T) {
	for _, tt := range []struct {
		limit int
		want  int64
	}{{limit: 2, want: 2}, {limit: 1, want: 1}, {limit: 0, want: 5}} {
		srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
			fakemodel.Reply{Calls: []call{
				{Name: "slow", Arguments: `{"id":"1"}`}, {Name: "slow", Arguments: `{"id":"2"}`}, {Name: "slow", Arguments: `{"id":"3"}`},
				{Name: "slow", Arguments: `{"id":"4"}`}, {Name: "slow", Arguments: `{"id":"5"}`},
			}},
			fakemodel.Reply{Text: "ok"},
		))
		f := newFixture(t, fixtureOpts{url: srv.URL, concurrency: tt.limit})
		if tt.limit == 0 {
			f.slowDelay = 500 * time.Millisecond // all five overlap even on a loaded machine
		}
		if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "go"}); err != nil {
			t.Fatal(err)
		}
		if got := f.slow.max.Load(); got != tt.want {
			t.Errorf("max_concurrency %d: %d calls at once; want %d", tt.limit, got, tt.want)
		}
		msgs := fakemodel.OpenAIMessages(srv.Requests()[1])
		for i := range 5 {
			if want := "done " + string(rune('1'+i)); msgs[3+i].Content != want {
				t.Errorf("limit %d: tool message %d = %q; want %q", tt.limit, i, msgs[3+i].Content, want)
			}
		}
	}
}

func TestMaxSteps(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(n int, _ map[string]any) fakemodel.Reply {
		return fakemodel.Reply{Calls: []call{{Name: "tape_info", Arguments: `{}`}}}
	})
	f := newFixture(t, fixtureOpts{url: srv.URL, maxSteps: 3})
	rec := &recorder{}
	res, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "loop forever", Sink: rec})
	if !errors.Is(err, agent.ErrMaxSteps) || !strings.Contains(err.Error(), "max_steps_reached=3") {
		t.Fatalf("err = %v; want max_steps_reached=3", err)
	}
	if len(srv.Requests()) != 3 || res.Steps != 3 || len(res.ToolCalls) != 3 {
		t.Errorf("%d requests, result %+v; want 3 steps", len(srv.Requests()), res)
	}
	if rec.events[len(rec.events)-1].Kind != agent.EventError {
		t.Errorf("last event = %+v; want an error", rec.events[len(rec.events)-1])
	}
	n := 0
	for _, e := range f.tape().Entries() {
		if e.Kind == sessions.KindEvent && e.Payload["name"] == "loop.step" {
			if d := e.Payload["data"].(map[string]any); d["status"] == "continue" {
				n++
			}
		}
	}
	if n != 3 {
		t.Errorf("%d continue steps on the tape; want 3", n)
	}
}

func TestInvalidJSONCorrected(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []call{{ID: "c1", Name: "fs_write", Arguments: `{"path": "x.txt", "content": `}}},
		fakemodel.Reply{Calls: []call{{ID: "c2", Name: "fs_write", Arguments: `{"path": "x.txt", "content": "fixed"}`}}},
		fakemodel.Reply{Text: "fixed it"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "write x"}); err != nil {
		t.Fatal(err)
	}
	msgs := fakemodel.OpenAIMessages(srv.Requests()[1])
	var e struct {
		Kind    string         `json:"kind"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(msgs[3].Content), &e); err != nil {
		t.Fatalf("tool message %q: %v", msgs[3].Content, err)
	}
	if e.Kind != "invalid_input" || e.Message != "Expected a function tool call with JSON object arguments." || e.Details["arguments"] != `{"path": "x.txt", "content": ` {
		t.Errorf("error result = %+v", e)
	}
	if got, _ := os.ReadFile(f.path("x.txt")); string(got) != "fixed" {
		t.Errorf("x.txt = %q", got)
	}
}

func TestUnknownTool(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []call{{Name: "fs_raed", Arguments: `{"path":"a"}`}, {Name: "zzzzzz", Arguments: `{}`}}},
		fakemodel.Reply{Text: "sorry"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "read a"}); err != nil {
		t.Fatal(err)
	}
	msgs := fakemodel.OpenAIMessages(srv.Requests()[1])
	want := []string{
		"Tool `fs_raed` does not exist. Did you mean one of the following?\n- fs_read\n- fs_write",
		"Tool `zzzzzz` does not exist. No similar tool is available.",
	}
	if diff := cmp.Diff(want, []string{msgs[3].Content, msgs[4].Content}); diff != "" {
		t.Errorf("unknown tool results (-want +got):\n%s", diff)
	}
}

func TestContextLengthHandoff(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Text: "first answer"},
		fakemodel.Reply{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`},
		fakemodel.Reply{Text: "after handoff"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "one"}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	res, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "two", Sink: rec})
	if err != nil || res.Text != "after handoff" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	reqs := srv.Requests()
	sys := msg{Role: "system", Content: f.system()}
	if diff := cmp.Diff([]msg{sys, {Role: "user", Content: "one"}, {Role: "assistant", Content: "first answer"}, {Role: "user", Content: "two"}}, fakemodel.OpenAIMessages(reqs[1])); diff != "" {
		t.Errorf("overflowing request (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]msg{sys, {Role: "user", Content: "two"}}, fakemodel.OpenAIMessages(reqs[2])); diff != "" {
		t.Errorf("request after handoff (-want +got):\n%s", diff)
	}
	anchors := f.tape().Anchors(0)
	last := anchors[len(anchors)-1]
	if last.Name != "auto_handoff/context_overflow" || last.State["reason"] != "context_length_exceeded" || !strings.Contains(last.State["error"].(string), "maximum context length") {
		t.Errorf("last anchor = %+v", last)
	}
	if rec.count(agent.EventHandoff) != 1 {
		t.Errorf("events %v; want one handoff", rec.kinds())
	}
}

func TestContextLengthHandoffOnlyOnce(t *testing.T) {
	overflow := fakemodel.Reply{Status: 400, Body: `{"error":{"message":"prompt is too long: 300000 tokens > 200000 maximum"}}`}
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t, overflow, overflow))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	_, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "big"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("err = %v; want the second overflow reported", err)
	}
}

func TestModelTimeoutKeepsTape(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Text: "earlier"},
		fakemodel.Reply{Delay: 5 * time.Second},
		fakemodel.Reply{Delay: 5 * time.Second},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "first"}); err != nil {
		t.Fatal(err)
	}
	before := f.tape().Entries()
	s := f.agent.Settings()
	s.Timeout = 150 * time.Millisecond
	impatient := agent.New(f.app, &agent.Options{Settings: s, SystemPrompt: testSystem, Attempts: 2, Backoff: 5 * time.Millisecond})
	rec := &recorder{}
	start := time.Now()
	_, err := impatient.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "second", Sink: rec})
	if err == nil || !strings.Contains(err.Error(), "no complete reply within 150ms") || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Fatalf("err = %v; want a timeout after 2 attempts", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the turn took %s", d)
	}
	if rec.count(agent.EventRetry) != 1 || len(srv.Requests()) != 3 {
		t.Errorf("events %v, %d requests; want one retry", rec.kinds(), len(srv.Requests()))
	}
	after := f.tape().Entries()
	if diff := cmp.Diff(before, after[:len(before)]); diff != "" {
		t.Errorf("the failure changed earlier entries (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"event:loop.start", "event:loop.step.start", "error", "event:run", "event:loop.step"}, entryKinds(after[len(before):])); diff != "" {
		t.Errorf("entries of the failed turn (-want +got):\n%s", diff)
	}
	// The next turn still sees the earlier conversation.
	got := agent.Messages(f.tape().ContextEntries())
	if len(got) != 2 || got[1].Content != "earlier" {
		t.Errorf("context after the failure = %+v", got)
	}
}

func TestNetworkErrorRetried(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Status: 503, Body: `{"error":{"message":"overloaded"}}`},
		fakemodel.Reply{Status: 429, Body: `rate limited`},
		fakemodel.Reply{Text: "third time lucky"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	rec := &recorder{}
	res, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "hi", Sink: rec})
	if err != nil || res.Text != "third time lucky" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if rec.count(agent.EventRetry) != 2 {
		t.Errorf("events %v; want two retries", rec.kinds())
	}
}

func TestAuthErrorNotRetried(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t, fakemodel.Reply{Status: 401, Body: `{"error":{"message":"bad key"}}`}))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	_, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "hi"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 401: bad key") {
		t.Fatalf("err = %v", err)
	}
}

func TestCancelStopsTurn(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t, fakemodel.Reply{Delay: 10 * time.Second}))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.agent.Run(ctx, &agent.Turn{Conn: f.conn, Prompt: "hang"})
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
}

func TestNoModel(t *testing.T) {
	f := newFixture(t, fixtureOpts{url: "http://127.0.0.1:1"})
	a := agent.New(f.app, &agent.Options{})
	rec := &recorder{}
	_, err := a.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "hi", Sink: rec})
	if !errors.Is(err, agent.ErrNoModel) || rec.count(agent.EventError) != 1 {
		t.Fatalf("err = %v, events %v", err, rec.kinds())
	}
}
