package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/internal/fakemodel"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/google/go-cmp/cmp"
)

// TestReasoningEffortReachesModels: ,reasoning_effort is recorded as a
// reasoning_effort_switch event and sent to the next turns' model calls,
// as reasoning_effort (OpenAI) or output_config.effort (Anthropic);
// clearing it sends nothing.
func TestReasoningEffortReachesModels(t *testing.T) {
	for _, tt := range []struct {
		provider string
		effort   func(req map[string]any) any
	}{
		{"openai", func(req map[string]any) any { return req["reasoning_effort"] }},
		{"anthropic", func(req map[string]any) any {
			oc, _ := req["output_config"].(map[string]any)
			return oc["effort"]
		}},
	} {
		t.Run(tt.provider, func(t *testing.T) {
			start := fakemodel.NewOpenAI
			if tt.provider == "anthropic" {
				start = fakemodel.NewAnthropic
			}
			srv := start(t, fakemodel.Replies(t, fakemodel.Reply{Text: "a"}, fakemodel.Reply{Text: "b"}))
			f := newFixture(t, fixtureOpts{provider: tt.provider, url: srv.URL})
			if _, err := f.agent.Command(t.Context(), f.conn, "reasoning_effort high"); err != nil {
				t.Fatal(err)
			}
			if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "think"}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.agent.Command(t.Context(), f.conn, "reasoning_effort ''"); err != nil {
				t.Fatal(err)
			}
			if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "think less"}); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests; want 2", len(reqs))
			}
			if got := []any{tt.effort(reqs[0]), tt.effort(reqs[1])}; !cmp.Equal(got, []any{"high", nil}) {
				t.Errorf("efforts sent = %v; want [high <nil>]", got)
			}
			sess, _ := f.app.Session(f.conn)
			var switches []any
			for _, e := range sess.Tape().Entries() {
				if e.Kind == sessions.KindEvent && e.Payload["name"] == sessions.EventReasoningEffortSwitch {
					switches = append(switches, e.Payload["data"].(map[string]any)["reasoning_effort"])
				}
			}
			if diff := cmp.Diff([]any{"high", ""}, switches); diff != "" {
				t.Errorf("reasoning_effort_switch events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCommandPrefix: with another prefix, its lines are commands, ","
// lines are prompts, and ,help shows the prefix.
func TestCommandPrefix(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t, fakemodel.Reply{Text: "a prompt"}))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	s := f.agent.Settings()
	s.CommandPrefix = "/"
	a := f.mod.Configure(&agent.Options{Settings: s, SystemPrompt: testSystem})
	rec := &recorder{}
	if err := a.Once(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "/help", Sink: rec}); err != nil {
		t.Fatal(err)
	}
	if err := a.Once(t.Context(), &agent.Turn{Conn: f.conn, Prompt: ",tape.info", Sink: rec}); err != nil {
		t.Fatal(err)
	}
	var finals []string
	for _, e := range rec.events {
		if e.Kind == agent.EventFinal {
			finals = append(finals, e.Text)
		}
	}
	if len(finals) != 2 || !strings.HasPrefix(finals[0], "Commands start with '/'") || !strings.Contains(finals[0], "\n  /model [provider:model]") || finals[1] != "a prompt" {
		t.Errorf("finals = %q; want /help's text, then the model's answer to ,tape.info", finals)
	}
}

// TestModelCallsCoerceLaxly: a model's quoted number is accepted, as
// Bub's pydantic validation accepts it, and a bad value is one error that
// names the tool as the model calls it.
func TestModelCallsCoerceLaxly(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []fakemodel.Call{
			{ID: "c1", Name: "fs_read", Arguments: `{"path":"n.txt","limit":"1"}`},
			{ID: "c2", Name: "fs_read", Arguments: `{"path":"n.txt","limit":"one"}`},
		}},
		fakemodel.Reply{Text: "done"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	if err := os.WriteFile(f.path("n.txt"), []byte("first\nsecond\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "read", Sink: rec}); err != nil {
		t.Fatal(err)
	}
	var outs []string
	for _, e := range rec.events {
		for _, r := range e.Results {
			outs = append(outs, r.Output)
		}
	}
	want := []string{"first", `{"kind":"invalid_input","message":"Tool 'fs_read' argument validation failed.","details":{"errors":[{"loc":"/limit","msg":"got string, want integer or null"}]}}`}
	if diff := cmp.Diff(want, outs); diff != "" {
		t.Errorf("tool outputs (-want +got):\n%s", diff)
	}
}

// TestCallerState: the caller's request-scoped state (the seed's
// request_id) reaches the turn's tools and a command's, and is never
// written to the tape.
func TestCallerState(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []fakemodel.Call{{ID: "c1", Name: "state", Arguments: `{}`}}},
		fakemodel.Reply{Text: "done"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL, state: true})
	state := map[string]any{"request_id": "req-01"}
	rec := &recorder{}
	if err := f.agent.Once(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "which request?", Sink: rec, State: state}); err != nil {
		t.Fatal(err)
	}
	if err := f.agent.Once(t.Context(), &agent.Turn{Conn: f.conn, Prompt: ",state", Sink: rec, State: state}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rec.events {
		for _, r := range e.Results {
			got = append(got, r.Output)
		}
		if e.Kind == agent.EventFinal && e.Name == "state" {
			got = append(got, e.Text)
		}
	}
	if diff := cmp.Diff([]string{"request_id=req-01", "request_id=req-01"}, got); diff != "" {
		t.Errorf("state seen (-want +got):\n%s", diff)
	}
	if len(state) != 1 {
		t.Errorf("the caller's map was modified: %v", state)
	}
	for _, e := range f.tape().Entries() {
		if b, _ := json.Marshal(e.Payload); strings.Contains(string(b), "req-01") && !strings.Contains(string(b), "request_id=req-01") {
			t.Errorf("state persisted on the tape: %s", b)
		}
	}
}

// TestSkillHintsInline: $name in a prompt inlines that skill's body in
// the system prompt's skills list, for the whole turn.
func TestSkillHintsInline(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t, fakemodel.Reply{Text: "ok"}, fakemodel.Reply{Text: "ok"}))
	f := newFixture(t, fixtureOpts{url: srv.URL, modules: []string{"skills"}})
	file := f.path(".agents/skills/deploy/SKILL.md")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("---\nname: deploy\ndescription: Ship it.\n---\nRun make deploy.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prompt := range []string{"use $deploy now", "deploy without a hint"} {
		if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: prompt}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	system := func(i int) string { return fakemodel.OpenAIMessages(reqs[i])[0].Content }
	inlined := "- deploy: Ship it.\n  Location: " + file + "\nRun make deploy.\n</available_skills>"
	if !strings.Contains(system(0), inlined) {
		t.Errorf("system prompt of the $deploy turn lacks the body:\n%s", system(0))
	}
	if s := system(1); strings.Contains(s, "Run make deploy.") || !strings.Contains(s, "- deploy: Ship it.\n</available_skills>") {
		t.Errorf("system prompt without a hint:\n%s", s)
	}
}
