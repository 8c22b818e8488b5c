package builtin

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/google/go-cmp/cmp"
)

func TestTapeTools(t *testing.T) {
	f := newFixture(t, nil)
	tape := f.sess.Tape()
	name := tape.Name()

	want := "name: " + name + "\nentries: 0\nanchors: 0\nlast_anchor: None\nentries_since_last_anchor: 0\nlast_token_usage: None\nlast_token_cache_hit_rate: None"
	if got := f.ok("tape.info", nil); got != want {
		t.Errorf("tape.info on a fresh tape = %q; want %q", got, want)
	}
	if got := f.ok("tape.anchors", nil); got != "(no anchors)" {
		t.Errorf("tape.anchors = %q", got)
	}

	if err := f.sess.EnsureBootstrap(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, tape, sessions.KindMessage, map[string]any{"role": "user", "content": "please deploy the rocket"})
	mustAppend(t, tape, sessions.KindMessage, map[string]any{"role": "assistant", "content": "[tape.search]: 1 matches (0 filtered) rocket"})
	mustAppend(t, tape, sessions.KindEvent, map[string]any{"name": "run", "data": map[string]any{
		"status": "ok", "usage": map[string]any{"total_tokens": 120, "prompt_tokens": 80, "prompt_tokens_details": map[string]any{"cached_tokens": 30}}}})

	if got := f.ok("tape.handoff", map[string]any{"name": "phase-1", "summary": "done"}); got != "anchor added: phase-1" {
		t.Errorf("tape.handoff = %q", got)
	}
	if got := f.ok("tape.handoff", nil); got != "anchor added: handoff" {
		t.Errorf("tape.handoff with defaults = %q", got)
	}
	if got := f.ok("tape.anchors", nil); got != "- session/start\n- phase-1\n- handoff" {
		t.Errorf("tape.anchors = %q", got)
	}
	res := f.call("tape.info", nil)
	info := res.Value.(TapeInfoResult)
	if info.LastAnchor == nil || *info.LastAnchor != "handoff" || info.LastTokenUsage == nil || *info.LastTokenUsage != 120 {
		t.Errorf("tape.info = %+v", info)
	}
	if !strings.HasSuffix(res.Text, "last_anchor: handoff\nentries_since_last_anchor: 1\nlast_token_usage: 120\nlast_token_cache_hit_rate: 37.50%") {
		t.Errorf("tape.info text = %q", res.Text)
	}

	res = f.call("tape.search", map[string]any{"query": "rocket"})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	lines := strings.Split(res.Text, "\n")
	if lines[0] != "[tape.search]: 1 matches (1 filtered)" || len(lines) != 2 {
		t.Fatalf("tape.search = %q", res.Text)
	}
	var m struct {
		Date    string         `json:"date"`
		Content map[string]any `json:"content"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil {
		t.Fatalf("match line %q: %v", lines[1], err)
	}
	if diff := cmp.Diff(map[string]any{"role": "user", "content": "please deploy the rocket"}, m.Content); diff != "" || m.Date == "" {
		t.Errorf("match (-want +got):\n%s (date %q)", diff, m.Date)
	}
	if got := f.ok("tape.search", map[string]any{"query": "rocket", "kinds": []string{"event"}}); got != "[tape.search]: 0 matches (0 filtered)" {
		t.Errorf("tape.search kinds=event = %q", got)
	}
	if got := f.ok("tape.search", map[string]any{"query": "rocket", "end": "2000-01-01"}); got != "[tape.search]: 0 matches (0 filtered)" {
		t.Errorf("tape.search end=2000-01-01 = %q", got)
	}
	if got := f.ok("tape.search", map[string]any{"query": "rocket", "start": "2000-01-01T00:00:00Z", "limit": 5}); !strings.HasPrefix(got, "[tape.search]: 1 matches") {
		t.Errorf("tape.search start=2000 = %q", got)
	}
	for _, args := range []map[string]any{
		{"query": " "},
		{"query": "x", "limit": -1},
		{"query": "x", "limit": 0},
		{"query": "x", "kinds": []string{"bogus"}},
		{"query": "x", "start": "yesterday"},
	} {
		if e := f.fails("tape.search", args); e.Kind != registry.KindInvalidInput {
			t.Errorf("tape.search(%v) = %v; want invalid_input", args, e)
		}
	}

	if got := f.ok("tape.reset", nil); got != "ok" {
		t.Errorf("tape.reset = %q", got)
	}
	if got := f.ok("tape.anchors", nil); got != "- session/start" {
		t.Errorf("tape.anchors after reset = %q", got)
	}
	res = f.call("tape.reset", map[string]any{"archive": true})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	archived := res.Value.(TapeResetResult).Archived
	if res.Text != "Archived: "+archived || !strings.HasSuffix(archived, ".bak") {
		t.Errorf("tape.reset archive = %q", res.Text)
	}
	if _, err := os.Stat(archived); err != nil {
		t.Errorf("archive %s: %v", archived, err)
	}
}

func TestTapeToolsWithoutSession(t *testing.T) {
	exec := newExec(t, &Module{})
	for _, tool := range []string{"tape.info", "tape.search", "tape.anchors", "tape.handoff", "tape.reset"} {
		args := `{}`
		if tool == "tape.search" {
			args = `{"query":"x"}`
		}
		res := exec.Call(t.Context(), registry.Call{Tool: tool, Args: []byte(args)})
		if res.Err == nil || res.Err.Kind != registry.KindConfig || !strings.Contains(res.Err.Message, "needs a session") {
			t.Errorf("%s without a session = %v; want a config error", tool, res.Err)
		}
	}
}

func mustAppend(t *testing.T, tape *sessions.Tape, kind string, payload map[string]any) {
	t.Helper()
	if _, err := tape.Append(kind, payload, nil); err != nil {
		t.Fatal(err)
	}
}
