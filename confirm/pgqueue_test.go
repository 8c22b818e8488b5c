package confirm_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/confirm"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
	_ "github.com/bubbuild/bub-mcp/sessions/pgstore" // [store] kind = "postgres"
	"github.com/google/go-cmp/cmp"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// pgQueue is a PGQueue over dsn, closed when the test ends.
func pgQueue(t *testing.T, dsn string) *confirm.PGQueue {
	t.Helper()
	q, err := confirm.NewPGQueue(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// The queue in PostgreSQL, used as a server and consoles on different
// machines would (separate pools on one database): the server's call is
// listed by a console; of several consoles deciding at once exactly one
// counts; the waiting server gets that decision within a poll; decided,
// removed and expired calls are neither listed nor decidable.
func TestPGQueueAcrossProcesses(t *testing.T) {
	dsn := pgtest.DSN(t)
	server, console := pgQueue(t, dsn), pgQueue(t, dsn)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := confirm.Pending{ID: confirm.NewID(), Created: now, Deadline: now.Add(time.Minute), Tool: "bash", Args: json.RawMessage(`{"command":"ls"}`), Profile: "default", Principal: "alice", Host: "replica-1", PID: 42}
	if err := server.Add(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := server.Add(ctx, confirm.Pending{ID: "../escape"}); err == nil {
		t.Error("Add accepted a bad id")
	}
	got, err := console.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]confirm.Pending{p}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	type waited struct {
		d   confirm.Decision
		err error
		at  time.Time
	}
	done := make(chan waited, 1)
	go func() {
		d, err := server.Wait(ctx, p.ID)
		done <- waited{d, err, time.Now()}
	}()
	consoles := []*confirm.PGQueue{console, pgQueue(t, dsn), pgQueue(t, dsn)}
	var wg sync.WaitGroup
	errs := make([]error, 9)
	decided := time.Now()
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = consoles[i%3].Decide(ctx, p.ID, confirm.Decision{Approved: true, By: "ops", Reason: "fine"})
		}()
	}
	wg.Wait()
	oneDecision(t, errs)
	w := <-done
	if w.err != nil || !w.d.Approved || w.d.By != "ops" || w.d.Reason != "fine" {
		t.Fatalf("Wait = %+v, %v", w.d, w.err)
	}
	if lag := w.at.Sub(decided); lag > time.Second {
		t.Errorf("the waiting server saw the decision after %v; want within a second", lag)
	}
	if got, _ := console.List(ctx); len(got) != 0 {
		t.Errorf("a decided call is still listed: %v", got)
	}
	if err := server.Remove(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := console.Decide(ctx, p.ID, confirm.Decision{Approved: true}); !errors.Is(err, confirm.ErrNotPending) {
		t.Errorf("Decide after Remove = %v; want ErrNotPending", err)
	}
	old := confirm.Pending{ID: confirm.NewID(), Created: now.Add(-time.Hour), Deadline: now.Add(-time.Second), Tool: "bash"}
	if err := server.Add(ctx, old); err != nil {
		t.Fatal(err)
	}
	if got, _ := console.List(ctx); len(got) != 0 {
		t.Errorf("an expired call is listed: %v", got)
	}
	if err := console.Decide(ctx, old.ID, confirm.Decision{Approved: true}); !errors.Is(err, confirm.ErrNotPending) {
		t.Errorf("Decide on an expired call = %v; want ErrNotPending", err)
	}
	if err := console.Decide(ctx, confirm.NewID(), confirm.Decision{Reason: strings.Repeat("x", 3000)}); err == nil || errors.Is(err, confirm.ErrNotPending) {
		t.Errorf("Decide with a 3000-byte reason = %v; want a length error", err)
	}
}

// QueueFor follows [store]: kind = "postgres" puts the queue in that
// database (a console elsewhere sees the calls), the default in
// $BUB_HOME/approvals.
func TestQueueForStore(t *testing.T) {
	dsn := pgtest.DSN(t)
	for _, tc := range []struct {
		name, store string
		wantPG      bool
	}{
		{"file", "", false},
		{"postgres", "[store]\nkind = \"postgres\"\ndsn_env = \"TEST_PG_DSN\"\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "TEST_PG_DSN" {
					return dsn
				}
				return ""
			}
			cfg, err := config.Parse("bub.toml", tc.store+"[profiles.default]\nworkspace = \""+t.TempDir()+"\"\n", getenv)
			if err != nil {
				t.Fatal(err)
			}
			a, err := app.New(t.Context(), &app.Options{Config: cfg, Home: t.TempDir(), Workspace: t.TempDir(), Getenv: getenv})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			q, err := confirm.QueueFor(a)
			if err != nil {
				t.Fatal(err)
			}
			pq, isPG := q.(*confirm.PGQueue)
			if isPG != tc.wantPG {
				t.Fatalf("QueueFor = %T; want PostgreSQL %v", q, tc.wantPG)
			}
			if !isPG {
				return
			}
			defer pq.Close()
			p := confirm.Pending{ID: confirm.NewID(), Created: time.Now(), Deadline: time.Now().Add(time.Minute), Tool: "bash"}
			if err := q.Add(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			got, err := pgQueue(t, dsn).List(t.Context())
			if err != nil || len(got) != 1 || got[0].ID != p.ID {
				t.Errorf("another connection's List = %v, %v; want the call", got, err)
			}
		})
	}
}
