package pgstore_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/bubbuild/bub-mcp/sessions/pgstore"
	"github.com/google/go-cmp/cmp"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// Shorthands for the sessions names the tests use.
type (
	Session     = sessions.Session
	Store       = sessions.Store
	Options     = sessions.Options
	SearchQuery = sessions.SearchQuery
	Tape        = sessions.Tape
	Entry       = sessions.Entry
)

const (
	KindMessage        = sessions.KindMessage
	KindEvent          = sessions.KindEvent
	KindAnchor         = sessions.KindAnchor
	KindToolResult     = sessions.KindToolResult
	MaxSpillReadChunks = sessions.MaxSpillReadChunks
)

// logBuffer collects slog output safely from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// openStore opens a store on home and closes it when the test ends.
func openStore(t *testing.T, home string, opts *Options) *Store {
	t.Helper()
	s, err := sessions.Open(home, opts)
	if err != nil {
		t.Fatalf("Open(%q) error: %v", home, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func session(t *testing.T, s *Store, workspace, id string) *Session {
	t.Helper()
	sess, err := s.Session(workspace, id)
	if err != nil {
		t.Fatalf("Session(%q, %q) error: %v", workspace, id, err)
	}
	return sess
}

func mustAppend(t *testing.T, tp *Tape, kind string, payload, meta map[string]any) Entry {
	t.Helper()
	e, err := tp.Append(kind, payload, meta)
	if err != nil {
		t.Fatalf("Append(%q) error: %v", kind, err)
	}
	return e
}

func msg(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func eventPayload(name string, data map[string]any) map[string]any {
	return map[string]any{"name": name, "data": data}
}

// seq returns 1..n.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// pgStoreFor opens a store on its own home (a replica's) and the database.
func pgStoreFor(t *testing.T, dsn string) *Store {
	t.Helper()
	return openStore(t, t.TempDir(), &Options{Logger: (&logBuffer{}).logger(), Store: pgstore.Kind, DSN: dsn, CommitInterval: 2 * time.Millisecond})
}

// eventually polls cond until it holds: replicas see each other's writes
// after at most pgstore.RefreshInterval.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPostgresTape(t *testing.T) {
	dsn := pgtest.DSN(t)
	ws := t.TempDir()
	s := pgStoreFor(t, dsn)
	sess := session(t, s, ws, "pg")
	tp := sess.Tape()
	if err := sess.EnsureBootstrap(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, tp, KindMessage, msg("user", "héllo <b>&</b>"), map[string]any{"run_id": "r1"})
	if err := tp.AppendAsync(KindEvent, eventPayload("loop.step", map[string]any{"i": 1}), map[string]any{"context": false}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, tp, KindEvent, eventPayload("run", map[string]any{"usage": map[string]any{"total_tokens": 7, "prompt_tokens": 4, "cached_tokens": 1}}), nil)
	if err := tp.Handoff("phase-2", "summary one"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, tp, KindToolResult, map[string]any{"results": []any{"needle in a haystack"}}, nil)
	if err := sess.SetModel("openai:x"); err != nil {
		t.Fatal(err)
	}
	if tp.Path() != "" {
		t.Errorf("Path = %q for a PostgreSQL tape", tp.Path())
	}

	all := tp.Entries()
	var ids []int
	var kinds []string
	for _, e := range all {
		ids, kinds = append(ids, e.ID), append(kinds, e.Kind)
	}
	if diff := cmp.Diff(seq(9), ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"anchor", "event", "message", "event", "event", "anchor", "event", "tool_result", "event"}, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if all[2].Payload["content"] != "héllo <b>&</b>" || all[2].Meta["run_id"] != "r1" {
		t.Errorf("message read back = %+v", all[2])
	}
	if since := tp.SinceLastAnchor(); len(since) != 3 || since[0].Payload["name"] != "handoff" {
		t.Errorf("SinceLastAnchor = %+v", since)
	}
	if a := tp.Anchors(0); len(a) != 2 || a[1].Name != "phase-2" || a[1].State["summary"] != "summary one" {
		t.Errorf("Anchors = %+v", a)
	}
	if res := tp.Search(SearchQuery{Query: "needle"}); len(res.Matches) != 1 || res.Matches[0].ID != 8 {
		t.Errorf("Search = %+v", res)
	}
	info := tp.Info()
	if info.Entries != 9 || info.Anchors != 2 || info.LastAnchor != "phase-2" || info.EntriesSinceLastAnchor != 3 ||
		info.LastTokenUsage == nil || *info.LastTokenUsage != 7 {
		t.Errorf("Info = %+v", info)
	}
	if m := sess.Settings().Model; m != "openai:x" {
		t.Errorf("model = %q", m)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Another process (a restart, here on another home) reads it all.
	s2 := pgStoreFor(t, dsn)
	sess2 := session(t, s2, ws, "pg")
	if diff := cmp.Diff(all, sess2.Tape().Entries()); diff != "" {
		t.Errorf("entries after restart (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(info, sess2.Tape().Info()); diff != "" {
		t.Errorf("info after restart (-before +after):\n%s", diff)
	}

	// Reset with archive: the old rows move to the archive tape.
	archived, err := sess2.Reset(true)
	if err != nil || !strings.HasPrefix(archived, "postgres:"+sess2.Tape().Name()+".") {
		t.Fatalf("Reset = %q, %v", archived, err)
	}
	after := sess2.Tape().Entries()
	if len(after) == 0 || after[0].ID != 1 || after[0].Kind != KindAnchor || after[0].Payload["state"].(map[string]any)["archived"] != archived {
		t.Errorf("entries after reset = %+v", after)
	}
	if m := sess2.Settings().Model; m != "openai:x" {
		t.Errorf("model after reset = %q; want kept", m)
	}
}

// TestPostgresReplicasShareATape runs two stores on separate homes (two
// replicas) on one database: concurrent appends get distinct increasing
// ids, and each sees the other's switches, spills and resets.
func TestPostgresReplicasShareATape(t *testing.T) {
	dsn := pgtest.DSN(t)
	ws := t.TempDir()
	a := session(t, pgStoreFor(t, dsn), ws, "shared")
	b := session(t, pgStoreFor(t, dsn), ws, "shared")
	const n = 100
	var wg sync.WaitGroup
	for w, sess := range []*Session{a, b} {
		wg.Go(func() {
			for i := range n {
				var err error
				if i%4 == 3 {
					err = sess.Tape().AppendAsync(KindEvent, eventPayload("loop.step", map[string]any{"w": w, "i": i}), nil)
				} else {
					_, err = sess.Tape().Append(KindMessage, msg("user", fmt.Sprintf("w%d-%d", w, i)), nil)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, s := range []*Session{a, b} {
		if err := s.Tape().Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var ids []int
	for _, e := range a.Tape().Entries() {
		ids = append(ids, e.ID)
	}
	if diff := cmp.Diff(seq(2*n), ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}

	if err := a.SetCodeMode(true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's code mode switch on b", func() bool { cm := b.Settings().CodeMode; return cm != nil && *cm })

	text := strings.Repeat("spilled text ", 3000)
	ref, err := a.Spill("bash", text)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for cursor := 0; ; {
		page, err := b.ReadSpill(ref.Handle, cursor, MaxSpillReadChunks, false)
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(page.Content)
		if page.Complete {
			break
		}
		cursor = page.NextCursor
	}
	if got.String() != text {
		t.Errorf("spill read through the other replica: %d bytes; want %d", got.Len(), len(text))
	}

	if _, err := b.Reset(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's reset on a", func() bool { return a.Tape().Info().Entries < 2*n })
	e := mustAppend(t, a.Tape(), KindMessage, msg("user", "after reset"), nil)
	if es := b.Tape().Entries(); es[len(es)-1].ID != e.ID {
		t.Errorf("b's last entry = %+v; want a's %d", es[len(es)-1], e.ID)
	}
}

func TestPostgresBootstrapOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	ws := t.TempDir()
	var ss []*Session
	for range 4 {
		ss = append(ss, session(t, pgStoreFor(t, dsn), ws, "boot"))
	}
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			if err := s.EnsureBootstrap(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(ss[0].Tape().Anchors(0)); n != 1 {
		t.Errorf("anchors = %d; want one session/start", n)
	}
}

// TestPostgresDown opens a store on a database nobody answers: sessions
// still open and report their settings (the defaults), and writes fail
// with an error that names the store.
func TestPostgresDown(t *testing.T) {
	pgtest.DSN(t) // skip or fail like the others when PostgreSQL is missing
	var logs logBuffer
	s := openStore(t, t.TempDir(), &Options{Logger: logs.logger(), Store: pgstore.Kind, DSN: "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"})
	sess := session(t, s, t.TempDir(), "down")
	if cm := sess.Settings().CodeMode; cm != nil {
		t.Errorf("settings with the database down = %v", cm)
	}
	_, err := sess.Tape().Append(KindMessage, msg("user", "x"), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "pgstore: ") {
		t.Errorf("Append with the database down = %v; want a pgstore: error", err)
	}
	if !strings.Contains(logs.String(), "postgres not ready") {
		t.Errorf("log = %q; want a warning that the database is not ready", logs.String())
	}
}

// BenchmarkPostgresAppend reports the PostgreSQL store's append rate:
// "sync" one committed transaction per Append, "group" AppendAsync from 8
// goroutines with group commit (the rate counts until all are committed).
func BenchmarkPostgresAppend(b *testing.B) {
	dsn := pgtest.DSN(b)
	payload := msg("assistant", strings.Repeat("lorem ipsum ", 20))
	b.Run("sync", func(b *testing.B) {
		s, err := sessions.Open(b.TempDir(), &Options{Store: pgstore.Kind, DSN: dsn})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		sess, _ := s.Session(b.TempDir(), "bench-sync")
		start := time.Now()
		for b.Loop() {
			if _, err := sess.Tape().Append(KindMessage, payload, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "entries/s")
	})
	b.Run("group", func(b *testing.B) {
		s, err := sessions.Open(b.TempDir(), &Options{Store: pgstore.Kind, DSN: dsn})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		sess, _ := s.Session(b.TempDir(), "bench-group")
		tp := sess.Tape()
		start := time.Now()
		var wg sync.WaitGroup
		per := b.N/8 + 1
		for range 8 {
			wg.Go(func() {
				for range per {
					if err := tp.AppendAsync(KindEvent, eventPayload("loop.step", map[string]any{"ok": true}), nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := tp.Flush(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(8*per)/time.Since(start).Seconds(), "entries/s")
	})
}

// BenchmarkSettings is what a tools/list costs the store (Resolve reads
// the session's settings): a stat for the file store, a query at most
// every pgstore.RefreshInterval for PostgreSQL.
func BenchmarkSettings(b *testing.B) {
	for _, kind := range []string{"file", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			o := &Options{}
			if kind == "postgres" {
				o.Store, o.DSN = pgstore.Kind, pgtest.DSN(b)
			}
			s, err := sessions.Open(b.TempDir(), o)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sess, _ := s.Session(b.TempDir(), "bench")
			if err := sess.SetCodeMode(true); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if cm := sess.Settings().CodeMode; cm == nil {
					b.Fatal("no setting")
				}
			}
		})
	}
}
