package audit

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestPostgresLog(t *testing.T) {
	dsn := pgtest.DSN(t)
	// Two logs (two replicas) on one database.
	a := open(t, Options{PostgresDSN: dsn, CommitInterval: time.Millisecond, MaxArgBytes: 16, KeepDays: -1})
	b := open(t, Options{PostgresDSN: dsn, CommitInterval: time.Millisecond})
	if a.Dir() != "" {
		t.Errorf("Dir = %q for a PostgreSQL log", a.Dir())
	}
	const n = 200
	var wg sync.WaitGroup
	for w, l := range []*Log{a, b} {
		wg.Go(func() {
			for i := range n {
				l.Record(Record{Time: time.Now(), Profile: "p", Transport: "http", Tool: fmt.Sprintf("w%d-%03d", w, i), Outcome: "ok"})
			}
		})
	}
	wg.Wait()
	old := time.Now().UTC().Truncate(time.Second).AddDate(0, 0, -60)
	a.Record(Record{Time: old, Principal: "ci", Profile: "p", Transport: "http", Tool: "fs.write",
		Args: []byte(`{"content":"0123456789abcdefghij"}`), Outcome: "error", ErrorKind: "tool", Error: "boom", Duration: 2 * time.Millisecond})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var count, distinct int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT record->>'tool') FROM bub_audit`).Scan(&count, &distinct); err != nil {
		t.Fatal(err)
	}
	if count != 2*n+1 || distinct != 2*n+1 {
		t.Errorf("rows = %d (%d distinct); want %d", count, distinct, 2*n+1)
	}
	var rec map[string]any
	var at time.Time
	if err := conn.QueryRow(ctx, `SELECT time, record FROM bub_audit WHERE record->>'tool' = 'fs.write'`).Scan(&at, &rec); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"time": old.Format(time.RFC3339Nano), "principal": "ci", "profile": "p", "transport": "http", "tool": "fs.write",
		"args": `{"content":"0123…[cut: 16 of 34 bytes]`, "args_bytes": 34.0, "args_truncated": true,
		"outcome": "error", "error_kind": "tool", "error": "boom", "duration_ms": 2.0}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if !at.Equal(old) {
		t.Errorf("time column = %v", at)
	}

	// keep_days prunes the table on the next commit.
	c := open(t, Options{PostgresDSN: dsn, KeepDays: 30})
	c.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: "fresh", Outcome: "ok"})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM bub_audit WHERE record->>'tool' = 'fs.write'`).Scan(&count); err != nil || count != 0 {
		t.Errorf("records older than keep_days: %d, %v; want pruned", count, err)
	}
}

// TestPostgresDown keeps records queued while the database does not
// answer, and says so.
func TestPostgresDown(t *testing.T) {
	pgtest.DSN(t) // skip or fail like the others when PostgreSQL is missing
	l := open(t, Options{PostgresDSN: "postgres://x@127.0.0.1:1/x?sslmode=disable&connect_timeout=1", CommitInterval: time.Hour})
	l.Record(Record{Time: time.Now(), Tool: "t"})
	if err := l.Flush(); err == nil {
		t.Error("Flush with the database down succeeded")
	}
	l.mu.Lock()
	queued := len(l.queue)
	l.mu.Unlock()
	if queued != 1 {
		t.Errorf("%d records queued; want the one kept for a retry", queued)
	}
}
