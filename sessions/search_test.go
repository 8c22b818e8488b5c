package sessions

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// writeTape writes a tape file for (ws, id) from entries with fixed dates,
// so date-dependent behaviour is deterministic.
func writeTape(t *testing.T, home, ws, id string, entries []Entry) {
	t.Helper()
	path := filepath.Join(home, "tapes", TapeName(resolveWorkspace(ws), id)+".jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for _, e := range entries {
		buf = append(buf, entryLine(t, e)...)
	}
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		t.Fatal(err)
	}
}

func day(d int) string { return fmt.Sprintf("2026-01-%02dT12:00:00Z", d) }

func searchFixture(t *testing.T) *Tape {
	t.Helper()
	home, ws := t.TempDir(), t.TempDir()
	entries := []Entry{
		{ID: 1, Kind: KindAnchor, Payload: map[string]any{"name": "session/start"}, Date: day(1)},
		{ID: 2, Kind: KindMessage, Payload: msg("user", "Please migrate the Database schema"), Date: day(2)},
		{ID: 3, Kind: KindToolResult, Payload: map[string]any{"results": []any{"migration applied to postgres"}}, Date: day(3)},
		{ID: 4, Kind: KindMessage, Payload: msg("user", "deploy to staging"), Date: day(4)},
		{ID: 5, Kind: KindEvent, Payload: eventPayload("deploy.done", map[string]any{"target": "staging"}), Date: day(5)},
		{ID: 6, Kind: KindMessage, Payload: msg("user", "deploy to staging"), Date: day(6)},
		{ID: 7, Kind: KindToolResult, Payload: map[string]any{"results": []any{"[tape.search]: 1 matches (0 filtered)\n{\"content\":\"deploy\"}"}}, Date: day(7)},
		{ID: 8, Kind: KindMessage, Payload: msg("assistant", "Deployed; the rollout is healthy"), Date: day(8)},
		{ID: 9, Kind: KindMessage, Payload: msg("user", "ok"), Date: "not a date"},
	}
	writeTape(t, home, ws, "search", entries)
	s := openStore(t, home, nil)
	return session(t, s, ws, "search").Tape()
}

func TestSearch(t *testing.T) {
	tp := searchFixture(t)
	ts := func(d int) time.Time { t, _ := time.Parse(time.RFC3339, day(d)); return t }
	tests := []struct {
		name         string
		q            SearchQuery
		wantIDs      []int
		wantFiltered int
	}{
		{"substring, case-insensitive, newest first, deduplicated", SearchQuery{Query: "DEPLOY"}, []int{8, 6}, 1},
		// As with rapidfuzz, a multi-word query scores 0.95*0.9*100 = 85.5
		// against any window sharing one of its words ("role").
		{"multi-word fuzzy matches a shared word", SearchQuery{Query: "role: assistant"}, []int{9, 8, 6, 2}, 0},
		{"fuzzy typo", SearchQuery{Query: "databse"}, []int{2}, 0},
		{"fuzzy multi-word", SearchQuery{Query: "migrate databse schema"}, []int{2}, 0},
		{"short query is not fuzzy", SearchQuery{Query: "pq"}, nil, 0},
		{"no match", SearchQuery{Query: "kubernetes"}, nil, 0},
		{"blank query", SearchQuery{Query: "   "}, nil, 0},
		{"kinds: events only", SearchQuery{Query: "staging", Kinds: []string{KindEvent}}, []int{5}, 0},
		{"kinds: default excludes events", SearchQuery{Query: "target"}, nil, 0},
		{"kinds: several", SearchQuery{Query: "target", Kinds: []string{KindEvent, KindMessage}}, []int{5}, 0},
		{"limit counts filtered hits", SearchQuery{Query: "deploy", Limit: 2}, []int{8}, 1},
		{"limit", SearchQuery{Query: "deploy", Limit: 1}, []int{8}, 0},
		{"date range inclusive", SearchQuery{Query: "deploy", Start: ts(4), End: ts(6)}, []int{6}, 0},
		{"start only", SearchQuery{Query: "a", Start: ts(8)}, []int{8}, 0},
		{"end only skips unparsable dates", SearchQuery{Query: "ok", End: ts(9)}, nil, 0},
		{"no bounds keeps unparsable dates", SearchQuery{Query: "ok"}, []int{9}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := tp.Search(tc.q)
			var ids []int
			for _, m := range res.Matches {
				ids = append(ids, m.ID)
			}
			if diff := cmp.Diff(tc.wantIDs, ids); diff != "" {
				t.Errorf("Search(%+v) ids (-want +got):\n%s", tc.q, diff)
			}
			if res.Filtered != tc.wantFiltered {
				t.Errorf("Search(%+v).Filtered = %d; want %d", tc.q, res.Filtered, tc.wantFiltered)
			}
		})
	}

	// A match carries its date and the payload as compact JSON.
	res := tp.Search(SearchQuery{Query: "rollout"})
	want := []Match{{ID: 8, Kind: KindMessage, Date: day(8), Content: `{"content":"Deployed; the rollout is healthy","role":"assistant"}`, Payload: msg("assistant", "Deployed; the rollout is healthy")}}
	if diff := cmp.Diff(want, res.Matches); diff != "" {
		t.Errorf("Search(rollout) (-want +got):\n%s", diff)
	}
}

func TestRenderText(t *testing.T) {
	got := renderText(map[string]any{
		"role":    "user",
		"content": "two\nlines",
		"n":       float64(3),
		"nested":  map[string]any{"b": true, "a": nil, "list": []any{"x", map[string]any{"k": 1.5}}, "empty": []any{}},
		"obj":     map[string]any{},
	})
	want := "content: two\nlines\nn: 3\nnested:\n  a: null\n  b: true\n  empty: []\n  list:\n  - x\n  -\n    k: 1.5\nobj: {}\nrole: user\n"
	if got != want {
		t.Errorf("renderText() = %q; want %q", got, want)
	}
}

func TestInfo(t *testing.T) {
	run := func(usage any) map[string]any {
		data := map[string]any{"status": "ok"}
		if usage != nil {
			data["usage"] = usage
		}
		return eventPayload("run", data)
	}
	ptr := func(n int) *int { return &n }
	rate := func(f float64) *float64 { return &f }
	tests := []struct {
		name      string
		events    []map[string]any
		wantUsage *int
		wantRate  *float64
		wantText  string
	}{
		{"no runs", nil, nil, nil, "None"},
		{"prompt_tokens_details", []map[string]any{run(map[string]any{
			"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10,
			"prompt_tokens_details": map[string]any{"cached_tokens": 3},
		})}, ptr(10), rate(0.375), "37.50%"},
		{"top-level cached_tokens with input_tokens", []map[string]any{run(map[string]any{
			"input_tokens": 80, "output_tokens": 20, "total_tokens": 100, "cached_tokens": 60,
		})}, ptr(100), rate(0.75), "75.00%"},
		{"no cache details", []map[string]any{run(map[string]any{
			"prompt_tokens": 80, "total_tokens": 100,
		})}, ptr(100), nil, "None"},
		{"latest run without usage is skipped", []map[string]any{
			run(map[string]any{"prompt_tokens": 4, "total_tokens": 5, "cached_tokens": 1}),
			run(nil),
			run(map[string]any{"total_tokens": "many"}),
		}, ptr(5), rate(0.25), "25.00%"},
		{"zero prompt tokens", []map[string]any{run(map[string]any{
			"prompt_tokens": 0, "total_tokens": 0, "cached_tokens": 0,
		})}, ptr(0), nil, "None"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), nil)
			sess := session(t, s, t.TempDir(), "info")
			if err := sess.EnsureBootstrap(); err != nil {
				t.Fatal(err)
			}
			for _, ev := range tc.events {
				mustAppend(t, sess.Tape(), KindEvent, ev, nil)
			}
			info := sess.Tape().Info()
			if diff := cmp.Diff(tc.wantUsage, info.LastTokenUsage); diff != "" {
				t.Errorf("LastTokenUsage (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRate, info.LastTokenCacheHitRate); diff != "" {
				t.Errorf("LastTokenCacheHitRate (-want +got):\n%s", diff)
			}
			if !strings.HasSuffix(info.String(), "last_token_cache_hit_rate: "+tc.wantText) {
				t.Errorf("Info.String() = %q; want hit rate %q", info.String(), tc.wantText)
			}
		})
	}
}

func TestInfoString(t *testing.T) {
	s := openStore(t, t.TempDir(), nil)
	sess := session(t, s, t.TempDir(), "info")
	tp := sess.Tape()
	if got, want := tp.Info().String(), "name: "+tp.Name()+"\nentries: 0\nanchors: 0\nlast_anchor: None\nentries_since_last_anchor: 0\nlast_token_usage: None\nlast_token_cache_hit_rate: None"; got != want {
		t.Errorf("empty Info().String() = %q; want %q", got, want)
	}
	if err := sess.EnsureBootstrap(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, tp, KindMessage, msg("user", "hi"), nil)
	mustAppend(t, tp, KindEvent, eventPayload("run", map[string]any{"usage": map[string]any{
		"prompt_tokens": 8, "total_tokens": 10, "prompt_tokens_details": map[string]any{"cached_tokens": 3}}}), nil)
	want := Info{Name: tp.Name(), Entries: 4, Anchors: 1, LastAnchor: "session/start", EntriesSinceLastAnchor: 3}
	got := tp.Info()
	got.LastTokenUsage, got.LastTokenCacheHitRate = nil, nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Info() (-want +got):\n%s", diff)
	}
	wantText := "name: " + tp.Name() + "\nentries: 4\nanchors: 1\nlast_anchor: session/start\nentries_since_last_anchor: 3\nlast_token_usage: 10\nlast_token_cache_hit_rate: 37.50%"
	if got := tp.Info().String(); got != wantText {
		t.Errorf("Info().String() = %q; want %q", got, wantText)
	}
}
