package sessions

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var ignoreDate = cmpopts.IgnoreFields(Entry{}, "Date")

func TestTapeName(t *testing.T) {
	// Python: md5(b"/ws").hexdigest()[:16] + "__" + md5(b"s").hexdigest()[:16]
	if got, want := TapeName("/ws", "s"), "948361d435417485__03c7c0ace395d801"; got != want {
		t.Errorf("TapeName(%q, %q) = %q; want %q", "/ws", "s", got, want)
	}
}

func TestAppendReadRoundTrip(t *testing.T) {
	home := t.TempDir()
	ws := t.TempDir()
	inputs := []struct {
		kind          string
		payload, meta map[string]any
	}{
		{KindAnchor, map[string]any{"name": "session/start", "state": map[string]any{"owner": "human"}}, nil},
		{KindSystem, map[string]any{"content": "be brief <b>&</b>"}, map[string]any{"run_id": "r1"}},
		{KindMessage, msg("user", "héllo 日本 🎉\nline two"), map[string]any{"run_id": "r1"}},
		{KindToolCall, map[string]any{"calls": []any{map[string]any{"id": "c1", "function": map[string]any{"name": "fs_read", "arguments": `{"path":"a"}`}}}}, nil},
		{KindToolResult, map[string]any{"results": []any{"ok", 3, true, nil}}, map[string]any{"context": false}},
		{KindEvent, map[string]any{"name": "run", "data": map[string]any{"usage": map[string]any{"total_tokens": 10}}}, nil},
		{KindError, map[string]any{"kind": "tool", "message": "boom"}, nil},
	}
	want := []Entry{
		{ID: 1, Kind: KindAnchor, Payload: map[string]any{"name": "session/start", "state": map[string]any{"owner": "human"}}, Meta: map[string]any{}},
		{ID: 2, Kind: KindSystem, Payload: map[string]any{"content": "be brief <b>&</b>"}, Meta: map[string]any{"run_id": "r1"}},
		{ID: 3, Kind: KindMessage, Payload: msg("user", "héllo 日本 🎉\nline two"), Meta: map[string]any{"run_id": "r1"}},
		{ID: 4, Kind: KindToolCall, Payload: map[string]any{"calls": []any{map[string]any{"id": "c1", "function": map[string]any{"name": "fs_read", "arguments": `{"path":"a"}`}}}}, Meta: map[string]any{}},
		{ID: 5, Kind: KindToolResult, Payload: map[string]any{"results": []any{"ok", float64(3), true, nil}}, Meta: map[string]any{"context": false}},
		{ID: 6, Kind: KindEvent, Payload: map[string]any{"name": "run", "data": map[string]any{"usage": map[string]any{"total_tokens": float64(10)}}}, Meta: map[string]any{}},
		{ID: 7, Kind: KindError, Payload: map[string]any{"kind": "tool", "message": "boom"}, Meta: map[string]any{}},
	}

	s := openStore(t, home, nil)
	tp := session(t, s, ws, "cli:1").Tape()
	for _, in := range inputs {
		mustAppend(t, tp, in.kind, in.payload, in.meta)
	}
	got := tp.Entries()
	if diff := cmp.Diff(want, got, ignoreDate); diff != "" {
		t.Errorf("Entries() mismatch (-want +got):\n%s", diff)
	}
	for _, e := range got {
		if _, ok := e.Time(); !ok {
			t.Errorf("entry %d date %q does not parse", e.ID, e.Date)
		}
	}
	// The HTML-ish text is stored unescaped, as Python's ensure_ascii=False does.
	if lines := fileLines(t, tp.Path()); !strings.Contains(lines[1], "<b>&</b>") || !strings.Contains(lines[2], "日本") {
		t.Errorf("file lines are escaped: %q", lines[1:3])
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() error: %v", err)
	}

	s2 := openStore(t, home, nil)
	again := session(t, s2, ws, "cli:1").Tape().Entries()
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("Entries() after reopen mismatch (-before +after):\n%s", diff)
	}
}

func TestAppendErrors(t *testing.T) {
	s := openStore(t, t.TempDir(), nil)
	tp := session(t, s, t.TempDir(), "x").Tape()
	tests := []struct {
		name    string
		kind    string
		payload map[string]any
	}{
		{"empty kind", "", nil},
		{"unencodable payload", KindEvent, map[string]any{"f": func() {}}},
		{"unencodable line-only payload", KindMessage, map[string]any{"f": func() {}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tp.Append(tc.kind, tc.payload, nil); err == nil || !strings.HasPrefix(err.Error(), "sessions: ") {
				t.Errorf("Append() error = %v; want a sessions: error", err)
			}
			if err := tp.AppendAsync(tc.kind, tc.payload, nil); err == nil {
				t.Errorf("AppendAsync() error = nil; want an error")
			}
		})
	}
	if n := len(tp.Entries()); n != 0 {
		t.Errorf("failed appends left %d entries", n)
	}
	s.Close()
	if _, err := tp.Append(KindMessage, msg("user", "late"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close error = %v; want ErrClosed", err)
	}
	if err := tp.AppendAsync(KindMessage, msg("user", "late"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("AppendAsync after Close error = %v; want ErrClosed", err)
	}
	if _, err := s.Session(t.TempDir(), "y"); !errors.Is(err, ErrClosed) {
		t.Errorf("Session after Close error = %v; want ErrClosed", err)
	}
}

// fileIDs returns the ids of the lines in a tape file, in file order.
func fileIDs(t *testing.T, path string) []int {
	t.Helper()
	var ids []int
	for _, l := range fileLines(t, path) {
		e, err := parseLine([]byte(l))
		if err != nil {
			t.Fatalf("file line %q does not parse: %v", l, err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestIDsMonotonicMixedPaths(t *testing.T) {
	home := t.TempDir()
	s := openStore(t, home, &Options{CommitInterval: 2 * time.Millisecond})
	tp := session(t, s, t.TempDir(), "mixed").Tape()
	const n = 300
	var got []int
	for i := range n {
		var err error
		switch i % 3 {
		case 0:
			var e Entry
			e, err = tp.Append(KindMessage, msg("user", fmt.Sprint(i)), nil)
			got = append(got, e.ID)
		case 1:
			err = tp.AppendAsync(KindEvent, eventPayload("loop.step", map[string]any{"i": i}), nil)
		case 2:
			err = tp.AppendAsync(KindEvent, eventPayload("loop.step", map[string]any{"i": i}), nil)
			if i%7 == 0 {
				time.Sleep(3 * time.Millisecond) // let a group commit run in between
			}
		}
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	// A synchronous append writes the queue ahead of itself: entry i gets
	// id i+1 whichever path it took.
	var want []int
	for i := 0; i < n; i += 3 {
		want = append(want, i+1)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("returned ids (-want +got):\n%s", diff)
	}
	if err := tp.Flush(); err != nil {
		t.Fatalf("Flush() error: %v", err)
	}
	if diff := cmp.Diff(seq(n), fileIDs(t, tp.Path())); diff != "" {
		t.Errorf("file ids (-want +got):\n%s", diff)
	}
}

func TestRestartKeepsEntriesAndSettings(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	s := openStore(t, home, nil)
	sess := session(t, s, ws, "telegram:42")
	if err := sess.EnsureBootstrap(); err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error { return sess.SetCodeMode(true) },
		func() error { return sess.SetModel("openrouter:free") },
		func() error { return sess.SetReasoningEffort("high") },
		func() error { return sess.SetModel("") },
		func() error { return sess.SetModel("anthropic:claude") },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := sess.Tape().AppendAsync(KindMessage, msg("user", "queued"), nil); err != nil {
		t.Fatal(err)
	}
	yes := true
	want := Settings{CodeMode: &yes, Model: "anthropic:claude", ReasoningEffort: "high"}
	if diff := cmp.Diff(want, sess.Settings()); diff != "" {
		t.Errorf("Settings() before restart (-want +got):\n%s", diff)
	}
	before := sess.Tape().Entries()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openStore(t, home, nil)
	sess2 := session(t, s2, ws, "telegram:42")
	if diff := cmp.Diff(want, sess2.Settings()); diff != "" {
		t.Errorf("Settings() after restart (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, sess2.Tape().Entries()); diff != "" {
		t.Errorf("Entries() after restart (-want +got):\n%s", diff)
	}
}

func TestSettingsReplay(t *testing.T) {
	yes, no := true, false
	ev := func(name string, data map[string]any) map[string]any { return eventPayload(name, data) }
	tests := []struct {
		name   string
		events []map[string]any
		want   Settings
	}{
		{"none", nil, Settings{}},
		{"code mode on", []map[string]any{ev(EventCodeModeSwitch, map[string]any{"code_mode": true})}, Settings{CodeMode: &yes}},
		{"latest wins", []map[string]any{
			ev(EventCodeModeSwitch, map[string]any{"code_mode": true}),
			ev(EventCodeModeSwitch, map[string]any{"code_mode": false}),
		}, Settings{CodeMode: &no}},
		{"null clears", []map[string]any{
			ev(EventCodeModeSwitch, map[string]any{"code_mode": true}),
			ev(EventCodeModeSwitch, map[string]any{"code_mode": nil}),
		}, Settings{}},
		{"empty string clears", []map[string]any{
			ev(EventModelSwitch, map[string]any{"model": "a:b"}),
			ev(EventModelSwitch, map[string]any{"model": ""}),
			ev(EventReasoningEffortSwitch, map[string]any{"reasoning_effort": "low"}),
		}, Settings{ReasoningEffort: "low"}},
		{"missing key and wrong type ignored", []map[string]any{
			ev(EventModelSwitch, map[string]any{"model": "a:b"}),
			ev(EventModelSwitch, map[string]any{"other": "x"}),
			ev(EventModelSwitch, map[string]any{"model": 7}),
			ev(EventCodeModeSwitch, map[string]any{"code_mode": "yes"}),
			{"name": EventModelSwitch, "data": "not an object"},
		}, Settings{Model: "a:b"}},
		{"loaded tools accumulate, sorted", []map[string]any{
			ev(EventToolDefinitionsLoaded, map[string]any{"tools": []any{"x.b", "x.a"}}),
			ev(EventToolDefinitionsLoaded, map[string]any{"tools": []string{"x.a", "y.c"}}),
			ev(EventToolDefinitionsLoaded, map[string]any{"tools": "not a list"}),
		}, Settings{LoadedTools: []string{"x.a", "x.b", "y.c"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), nil)
			tp := session(t, s, t.TempDir(), "x").Tape()
			for _, p := range tc.events {
				mustAppend(t, tp, KindEvent, p, nil)
			}
			if diff := cmp.Diff(tc.want, tp.currentSettings()); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTornLastLineSkipped(t *testing.T) {
	good1 := `{"id":1,"kind":"anchor","payload":{"name":"session/start"},"meta":{},"date":"2026-01-01T00:00:00Z"}`
	good2 := `{"id":2,"kind":"message","payload":{"role":"user","content":"hi"},"meta":{},"date":"2026-01-01T00:00:01Z"}`
	tests := []struct {
		name      string
		content   string
		wantIDs   []int // after reopen, with one new append
		wantWarn  string
		wantLines int // lines in the file after the append
	}{
		{"torn json", good1 + "\n" + good2 + "\n" + `{"id":3,"kind":"mess`, []int{1, 2, 3}, "skipping torn last tape line", 4},
		{"valid line without newline", good1 + "\n" + good2, []int{1, 2, 3}, "", 3},
		{"garbage in the middle", good1 + "\nnot json\n" + good2 + "\n", []int{1, 2, 3}, "skipping invalid tape line", 4},
		{"blank lines", "\n" + good1 + "\n\n" + good2 + "\n\n", []int{1, 2, 3}, "", 3},
		{"only torn", `{"id":1,"ki`, []int{1}, "skipping torn last tape line", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home, ws := t.TempDir(), t.TempDir()
			name := TapeName(resolveWorkspace(ws), "s")
			path := filepath.Join(home, "tapes", name+".jsonl")
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			s := openStore(t, home, &Options{Logger: logs.logger()})
			tp := session(t, s, ws, "s").Tape()
			if tc.wantWarn != "" && !strings.Contains(logs.String(), tc.wantWarn) {
				t.Errorf("log = %q; want a warning containing %q", logs.String(), tc.wantWarn)
			}
			if tc.wantWarn == "" && logs.String() != "" {
				t.Errorf("log = %q; want no warning", logs.String())
			}
			e := mustAppend(t, tp, KindMessage, msg("user", "after crash"), nil)
			if want := tc.wantIDs[len(tc.wantIDs)-1]; e.ID != want {
				t.Errorf("new entry id = %d; want %d", e.ID, want)
			}
			s.Close()
			if got := fileLines(t, path); len(got) != tc.wantLines {
				t.Errorf("file has %d lines; want %d:\n%s", len(got), tc.wantLines, strings.Join(got, "\n"))
			}

			s2 := openStore(t, home, nil)
			var ids []int
			for _, e := range session(t, s2, ws, "s").Tape().Entries() {
				ids = append(ids, e.ID)
			}
			if diff := cmp.Diff(tc.wantIDs, ids); diff != "" {
				t.Errorf("ids after reopen (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPermissions(t *testing.T) {
	home := filepath.Join(t.TempDir(), "bub")
	s := openStore(t, home, nil)
	sess := session(t, s, t.TempDir(), "perm")
	mustAppend(t, sess.Tape(), KindMessage, msg("user", "x"), nil)
	if _, err := sess.Spill("bash", strings.Repeat("y", 20000)); err != nil {
		t.Fatal(err)
	}
	tapePath := sess.Tape().Path()
	sidePath := strings.TrimSuffix(tapePath, ".jsonl") + "__sidecar__spill.jsonl"
	check := func(path string, want os.FileMode) {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Errorf("Stat(%q) error: %v", path, err)
			return
		}
		if st.Mode() != want {
			t.Errorf("mode of %s = %v; want %v", filepath.Base(path), st.Mode(), want)
		}
	}
	check(home, 0o700|os.ModeDir)
	check(filepath.Join(home, "tapes"), 0o700|os.ModeDir)
	check(tapePath, 0o600)
	check(sidePath, 0o600)

	archived, err := sess.Reset(true)
	if err != nil {
		t.Fatal(err)
	}
	check(archived, 0o600)
	check(sidePath+strings.TrimPrefix(archived, tapePath), 0o600)
	check(tapePath, 0o600) // recreated by the reset anchor
}

func TestConcurrentWriters(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	s := openStore(t, home, &Options{CommitInterval: time.Millisecond})
	const workers, each = 32, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			// Every goroutine asks for the session itself: all must share it.
			sess, err := s.Session(ws, "shared")
			if err != nil {
				t.Error(err)
				return
			}
			for i := range each {
				var err error
				payload := msg("user", fmt.Sprintf("w%d-%d", w, i))
				switch i % 4 {
				case 0:
					_, err = sess.Tape().Append(KindMessage, payload, nil)
				case 1:
					err = sess.Tape().Handoff(fmt.Sprintf("h%d-%d", w, i), "s")
				default:
					err = sess.Tape().AppendAsync(KindMessage, payload, nil)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					sess.Tape().Info() // readers run alongside
					sess.Tape().Search(SearchQuery{Query: "w1"})
				}
			}
		})
	}
	wg.Wait()
	sess := session(t, s, ws, "shared")
	path := sess.Tape().Path()
	// Handoff writes two entries.
	total := workers * (each + each/4)
	if got := len(sess.Tape().Entries()); got != total {
		t.Errorf("Entries() has %d; want %d", got, total)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(seq(total), fileIDs(t, path)); diff != "" {
		t.Errorf("file ids are not 1..%d in order (-want +got):\n%s", total, diff)
	}
}

func TestGroupCommit(t *testing.T) {
	t.Run("flushed on Close", func(t *testing.T) {
		home, ws := t.TempDir(), t.TempDir()
		s := openStore(t, home, &Options{CommitInterval: time.Hour})
		tp := session(t, s, ws, "gc").Tape()
		for i := range 50 {
			if err := tp.AppendAsync(KindEvent, eventPayload("loop.step", map[string]any{"i": i}), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(tp.Path()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("tape file exists before the commit interval (err=%v)", err)
		}
		if got := len(tp.Entries()); got != 50 {
			t.Errorf("queued entries not visible to readers: %d", got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seq(50), fileIDs(t, tp.Path())); diff != "" {
			t.Errorf("file ids (-want +got):\n%s", diff)
		}
	})
	t.Run("written within the interval", func(t *testing.T) {
		s := openStore(t, t.TempDir(), &Options{CommitInterval: 5 * time.Millisecond, SyncCommits: true})
		tp := session(t, s, t.TempDir(), "gc").Tape()
		if err := tp.AppendAsync(KindEvent, eventPayload("loop.start", nil), nil); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			if b, err := os.ReadFile(tp.Path()); err == nil && strings.Contains(string(b), "loop.start") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("group commit did not write the entry")
			}
			time.Sleep(time.Millisecond)
		}
	})
	t.Run("sync append carries queued lines", func(t *testing.T) {
		s := openStore(t, t.TempDir(), &Options{CommitInterval: time.Hour})
		tp := session(t, s, t.TempDir(), "gc").Tape()
		tp.AppendAsync(KindEvent, eventPayload("a", nil), nil)
		tp.AppendAsync(KindEvent, eventPayload("b", nil), nil)
		mustAppend(t, tp, KindMessage, msg("user", "c"), nil)
		if diff := cmp.Diff([]int{1, 2, 3}, fileIDs(t, tp.Path())); diff != "" {
			t.Errorf("file ids (-want +got):\n%s", diff)
		}
	})
}

func TestWriteFailureKeepsEntriesQueued(t *testing.T) {
	home := t.TempDir()
	var logs logBuffer
	s := openStore(t, home, &Options{Logger: logs.logger(), CommitInterval: time.Hour})
	sess := session(t, s, t.TempDir(), "fail")
	tp := sess.Tape()
	// Make the tape path a directory so opening it fails.
	if err := os.MkdirAll(tp.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := tp.AppendAsync(KindEvent, eventPayload("queued", nil), nil); err != nil {
		t.Fatal(err)
	}
	// A synchronous append that fails says so and records nothing; the
	// queued entry it tried to write ahead of itself stays queued.
	if _, err := tp.Append(KindMessage, msg("user", "lost"), nil); err == nil || !strings.HasPrefix(err.Error(), "sessions: ") {
		t.Fatalf("Append to an unwritable tape error = %v; want a sessions: error", err)
	}
	if err := tp.Flush(); err == nil {
		t.Error("Flush to an unwritable tape succeeded")
	}
	if !strings.Contains(logs.String(), "tape write failed") {
		t.Errorf("log = %q; want a write-failure warning", logs.String())
	}
	if err := os.Remove(tp.Path()); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, tp, KindMessage, msg("user", "two"), nil)
	var got []string
	for _, e := range tp.Entries() {
		got = append(got, fmt.Sprint(e.ID, " ", e.Kind))
	}
	if diff := cmp.Diff([]string{"1 event", "2 message"}, got); diff != "" {
		t.Errorf("entries after recovery (-want +got):\n%s", diff)
	}
}

func TestSessionIdentity(t *testing.T) {
	s := openStore(t, t.TempDir(), nil)
	ws := t.TempDir()
	a := session(t, s, ws, "x")
	b := session(t, s, filepath.Join(ws, "sub", ".."), "x")
	c := session(t, s, ws, "y")
	if a != b {
		t.Errorf("Session() for the same resolved workspace returned different sessions")
	}
	if a == c {
		t.Errorf("Session() for different ids returned the same session")
	}
	if want := TapeName(resolveWorkspace(ws), "x"); a.Tape().Name() != want {
		t.Errorf("tape name = %q; want %q", a.Tape().Name(), want)
	}
}

func TestDefaultHome(t *testing.T) {
	t.Setenv("BUB_HOME", "/srv/bub")
	if got, err := DefaultHome(); err != nil || got != "/srv/bub" {
		t.Errorf("DefaultHome() = %q, %v; want /srv/bub", got, err)
	}
	t.Setenv("HOME", "/home/u")
	t.Setenv("BUB_HOME", "~/b")
	if got, _ := DefaultHome(); got != "/home/u/b" {
		t.Errorf("DefaultHome() with ~ = %q; want /home/u/b", got)
	}
	t.Setenv("BUB_HOME", "")
	if got, _ := DefaultHome(); got != "/home/u/.bub" {
		t.Errorf("DefaultHome() unset = %q; want /home/u/.bub", got)
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		line    string
		want    Entry
		wantErr bool
	}{
		{`{"id":1,"kind":"message","payload":{"a":1},"meta":{"m":true},"date":"d"}`,
			Entry{ID: 1, Kind: "message", Payload: map[string]any{"a": float64(1)}, Meta: map[string]any{"m": true}, Date: "d"}, false},
		{`{"id":2,"kind":"event","payload":{},"meta":null,"timestamp":1.5}`,
			Entry{ID: 2, Kind: "event", Payload: map[string]any{}, Meta: map[string]any{}, Date: "1970-01-01T00:00:01.5Z"}, false},
		{`{"id":3,"kind":"event","payload":{}}`,
			Entry{ID: 3, Kind: "event", Payload: map[string]any{}, Meta: map[string]any{}, Date: "1970-01-01T00:00:00Z"}, false},
		{`{"id":1.0,"kind":"message","payload":{}}`, Entry{}, true},
		{`{"id":true,"kind":"message","payload":{}}`, Entry{}, true},
		{`{"id":"1","kind":"message","payload":{}}`, Entry{}, true},
		{`{"id":1,"kind":5,"payload":{}}`, Entry{}, true},
		{`{"id":1,"kind":"m","payload":[]}`, Entry{}, true},
		{`{"id":1,"kind":"m"}`, Entry{}, true},
		{`[1,2]`, Entry{}, true},
		{`null`, Entry{}, true},
		{`{"id":99999999999999999999,"kind":"m","payload":{}}`, Entry{}, true},
	}
	for _, tc := range tests {
		got, err := parseLine([]byte(tc.line))
		if (err != nil) != tc.wantErr {
			t.Errorf("parseLine(%q) error = %v; wantErr %v", tc.line, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseLine(%q) mismatch (-want +got):\n%s", tc.line, diff)
		}
	}
}

func FuzzTapeLine(f *testing.F) {
	f.Add([]byte(`{"id":1,"kind":"anchor","payload":{"name":"session/start","state":{"owner":"human"}},"meta":{},"date":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":2,"kind":"message","payload":{"content":"héllo \u2028 <x>"},"meta":{"context":false},"date":"x"}`))
	f.Add([]byte(`{"id":3,"kind":"event","payload":{},"timestamp":1e300}`))
	f.Add([]byte(`{"id":-4,"kind":"","payload":{"a":[1,2,{"b":null}]},"meta":[]}`))
	f.Add([]byte(`{"id":1,"kind":"mess`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := parseLine(line)
		if err != nil {
			return
		}
		// A parsed entry must survive our own encoding unchanged.
		out := entryLine(t, e)
		again, err := parseLine(out)
		if err != nil {
			t.Fatalf("re-parsing %q: %v", out, err)
		}
		if diff := cmp.Diff(e, again); diff != "" {
			t.Fatalf("round trip of %q changed the entry (-first +second):\n%s", line, diff)
		}
	})
}

// benchTape returns a fresh file-backed tape closed when b ends.
func benchTape(b *testing.B) *Tape {
	b.Helper()
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	sess, err := s.Session(b.TempDir(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	return sess.Tape()
}

func BenchmarkAppend(b *testing.B) {
	tp := benchTape(b)
	payload := msg("assistant", strings.Repeat("lorem ipsum ", 20))
	meta := map[string]any{"run_id": "run-1"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tp.Append(KindMessage, payload, meta); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendAsync(b *testing.B) {
	meta := map[string]any{"run_id": "run-1"}
	for _, bc := range []struct {
		name, kind string
		payload    map[string]any
	}{
		// Events keep a decoded copy; tool results (the audit pair of
		// every call) are kept only as their line.
		{"event", KindEvent, eventPayload("loop.step", map[string]any{"status": "ok", "step": 3, "elapsed_ms": 12.5})},
		{"tool_result", KindToolResult, map[string]any{"results": []any{map[string]any{"call_id": "run-1", "output": "ok", "status": "ok", "elapsed_ms": 12}}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tp := benchTape(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := tp.AppendAsync(bc.kind, bc.payload, meta); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
