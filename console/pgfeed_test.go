package console

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
	_ "github.com/bubbuild/bub-mcp/sessions/pgstore" // [store] kind = "postgres"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// With [audit] store = "postgres" the console reads the audit table: the
// calls written before it started, calls another replica writes while it
// runs (live, by id), and a row that becomes visible after a larger id
// (concurrent inserts) — all in Seq order, each found by its id. The
// chain check says why there is none.
func TestConsoleAuditInPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	getenv := func(k string) string {
		if k == "TEST_PG_DSN" {
			return dsn
		}
		return ""
	}
	src := "[store]\nkind = \"postgres\"\ndsn_env = \"TEST_PG_DSN\"\n[audit]\nstore = \"postgres\"\n[profiles.default]\nworkspace = \"" + t.TempDir() + "\"\n"
	cfg, err := config.Parse("bub.toml", src, getenv)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Home: t.TempDir(), Workspace: t.TempDir(), Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Another replica's log, on the same table.
	replica, err := audit.Open(audit.Options{Dir: t.TempDir(), PostgresDSN: dsn, CommitInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()
	replica.Record(rec("fs.read", "before", "ok", `{"path":"a"}`))
	if err := replica.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{App: a, Loopback: true, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools := func() []string {
		var out []string
		for _, call := range c.feed.recent(&Filter{}, 100) {
			out = append([]string{fmt.Sprintf("%s/%s", call.Tool, call.Principal)}, out...)
		}
		return out
	}
	if got := tools(); strings.Join(got, " ") != "fs.read/before" {
		t.Fatalf("history = %v", got)
	}
	replica.Record(rec("bash", "live", "error", `{"command":"ls"}`))
	if err := replica.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the live call", func() bool { return len(tools()) == 2 })

	// Rows committed out of id order: id last+2 first, then last+1.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var last int64
	if err := conn.QueryRow(context.Background(), `SELECT max(id) FROM bub_audit`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	insert := func(id int64, who string) {
		t.Helper()
		rec := fmt.Sprintf(`{"time":%q,"principal":%q,"profile":"default","transport":"http","tool":"late","args":{},"outcome":"ok"}`, time.Now().UTC().Format(time.RFC3339Nano), who)
		if _, err := conn.Exec(context.Background(), `INSERT INTO bub_audit (id, time, record) VALUES ($1, now(), $2::jsonb)`, id, rec); err != nil {
			t.Fatal(err)
		}
	}
	insert(last+2, "second")
	waitFor(t, "the larger id", func() bool { return len(tools()) == 3 })
	insert(last+1, "first")
	waitFor(t, "the row visible late", func() bool { return len(tools()) == 4 })
	want := "fs.read/before bash/live late/first late/second"
	if got := strings.Join(tools(), " "); got != want {
		t.Errorf("calls = %q; want %q", got, want)
	}
	if call, ok := c.feed.bySeq(last + 1); !ok || call.Principal != "first" {
		t.Errorf("bySeq(%d) = %+v, %v", last+1, call, ok)
	}

	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	f := &fixture{c: c, srv: srv}
	_, body := f.get(t, "/console/calls", "")
	if !strings.Contains(body, "not hash-chained") {
		t.Errorf("calls page does not explain the missing chain check:\n%s", body)
	}
	// A filter reaching before the ring reads the table.
	_, body = f.get(t, "/console/calls?principal=before&since=2000-01-01T00:00", "")
	if !strings.Contains(body, "fs.read") {
		t.Errorf("a filter over the table found nothing:\n%s", body)
	}
}
