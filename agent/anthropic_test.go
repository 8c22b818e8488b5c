package agent_test

import (
	"os"
	"testing"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/internal/fakemodel"
	"github.com/google/go-cmp/cmp"
)

// TestTurnAnthropic runs a turn against the Messages wire format: system
// prompt apart (cached), tool_use blocks in the assistant message, their
// results as tool_result blocks of the next user message.
func TestTurnAnthropic(t *testing.T) {
	srv := fakemodel.NewAnthropic(t, fakemodel.Replies(t,
		fakemodel.Reply{Text: "On it.", Calls: []call{{ID: "toolu_a", Name: "fs_write", Arguments: `{"path":"b.txt","content":"claude"}`}, {ID: "toolu_b", Name: "tape_info", Arguments: ``}}, PromptTokens: 50, CompletionTokens: 10, CachedTokens: 20},
		fakemodel.Reply{Text: "Wrote b.txt."},
	))
	f := newFixture(t, fixtureOpts{provider: "anthropic", url: srv.URL})
	rec := &recorder{}
	res, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "write b.txt", Sink: rec})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Wrote b.txt." || res.Usage.PromptTokens != 60 || res.Usage.CachedTokens != 20 || res.Usage.TotalTokens != 75 {
		t.Errorf("result = %+v", res)
	}
	if got, _ := os.ReadFile(f.path("b.txt")); string(got) != "claude" {
		t.Errorf("b.txt = %q", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	wantSystem := []any{map[string]any{"type": "text", "text": f.system(), "cache_control": map[string]any{"type": "ephemeral"}}}
	if diff := cmp.Diff(wantSystem, reqs[1]["system"]); diff != "" {
		t.Errorf("system (-want +got):\n%s", diff)
	}
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	wantMsgs := []any{
		map[string]any{"role": "user", "content": []any{text("write b.txt")}},
		map[string]any{"role": "assistant", "content": []any{
			text("On it."),
			map[string]any{"type": "tool_use", "id": "toolu_a", "name": "fs_write", "input": map[string]any{"path": "b.txt", "content": "claude"}},
			map[string]any{"type": "tool_use", "id": "toolu_b", "name": "tape_info", "input": map[string]any{}},
		}},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_a", "content": []any{text("wrote: " + f.path("b.txt"))}, "is_error": false},
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_b", "content": []any{text(res0(t, f))}, "is_error": false},
			text(agent.ContinuePrompt),
		}},
	}
	if diff := cmp.Diff(wantMsgs, reqs[1]["messages"]); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"bash", "fs_read", "fs_write", "pair", "slow", "subagent", "tape_handoff", "tape_info", "tape_search"}, fakemodel.ToolNames(reqs[0])); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if reqs[0]["stream"] != true || reqs[0]["max_tokens"] != float64(16384) {
		t.Errorf("stream %v max_tokens %v", reqs[0]["stream"], reqs[0]["max_tokens"])
	}
}

// res0 is the tape_info output the first step recorded.
func res0(t *testing.T, f *fixture) string {
	t.Helper()
	for _, e := range f.tape().Entries() {
		if e.Kind == "tool_result" {
			return e.Payload["results"].([]any)[1].(string)
		}
	}
	t.Fatal("no tool_result on the tape")
	return ""
}
