package confirm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/confirm"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
)

// viaServer serves test.write under profiles that confirm it through
// the console; the approvals queue is in home, or in the PostgreSQL
// database at dsn when dsn is set ([store] kind = "postgres").
func viaServer(t *testing.T, ran *atomic.Int64, home, dsn string) *mcpserver.Server {
	t.Helper()
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("test.write", "Change something.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		What string `json:"what"`
	}) (string, error) {
		ran.Add(1)
		return "wrote " + in.What, nil
	}))
	store := ""
	if dsn != "" {
		store = "[store]\nkind = \"postgres\"\ndsn_env = \"TEST_PG_DSN\"\n"
	}
	getenv := func(k string) string {
		if k == "TEST_PG_DSN" {
			return dsn
		}
		return ""
	}
	cfg, err := config.Parse("t.toml", store+`
[profiles.default]
confirm = ["test.write"]
confirm_via = ["elicitation", "console"]
confirm_timeout = "5s"

[profiles.console_first]
confirm = ["test.write"]
confirm_via = ["console", "elicitation"]
confirm_timeout = "5s"

[profiles.short]
confirm = ["test.write"]
confirm_via = ["console"]
confirm_timeout = "300ms"
`, getenv)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: reg, Modules: []string{"confirm"},
		Home: home, Workspace: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv, err := mcpserver.New(&mcpserver.Options{Backend: a, Registry: a.Registry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// decideWhenQueued plays the console: it approves (or denies) the first
// call that appears in the queue and reports what it saw.
func decideWhenQueued(t *testing.T, q confirm.Queue, approve bool) <-chan confirm.Pending {
	seen := make(chan confirm.Pending, 1)
	go func() {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			ps, _ := q.List(context.Background())
			if len(ps) > 0 {
				q.Decide(context.Background(), ps[0].ID, confirm.Decision{Approved: approve, Reason: "checked", By: "ops"})
				seen <- ps[0]
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(seen)
	}()
	return seen
}

// viaCase is one case of TestConfirmVia.
type viaCase struct {
	name      string
	profile   string
	elicit    bool // the client declares elicitation and accepts
	console   bool // someone decides in the queue
	approve   bool
	want      string
	isError   bool
	runs      int64
	asks      int
	viaQueued bool
}

func TestConfirmVia(t *testing.T) {
	tests := []viaCase{
		{"no elicitation: the console approves", "default", false, true, true, "wrote x", false, 1, 0, true},
		{"no elicitation: the console denies", "default", false, true, false, "ops denied it in the console. Reason: checked", true, 0, 0, true},
		{"elicitation first", "default", true, false, false, "wrote x", false, 1, 1, false},
		{"console first", "console_first", true, true, true, "wrote x", false, 1, 0, true},
		{"no one answers", "short", false, false, false, "no one approved it in the console within 300ms (profiles.short.confirm_timeout)", true, 0, 0, false},
	}
	for _, store := range []string{"file", "postgres"} {
		for _, tt := range tests {
			t.Run(store+"/"+tt.name, func(t *testing.T) {
				testConfirmVia(t, store, tt)
			})
		}
	}
}

// testConfirmVia is one case of TestConfirmVia: the server holds the call
// in the queue of store ("file" or "postgres"), and a separate queue
// over the same storage, playing the console, decides it.
func testConfirmVia(t *testing.T, store string, tt viaCase) {
	var ran atomic.Int64
	home := t.TempDir()
	dsn := ""
	var q confirm.Queue = confirm.NewFileQueue(filepath.Join(home, "approvals"))
	if store == "postgres" {
		dsn = pgtest.DSN(t)
		q = pgQueue(t, dsn)
	}
	var el *elicitor
	if tt.elicit {
		el = &elicitor{}
		el.set(mcp.ElicitationResponseActionAccept)
	}
	c := connect(t, viaServer(t, &ran, home, dsn), el, tt.profile)
	var seen <-chan confirm.Pending
	if tt.console {
		seen = decideWhenQueued(t, q, tt.approve)
	}
	text, isError := call(t, c, "test_write", map[string]any{"what": "x"})
	if isError != tt.isError || !strings.Contains(text, tt.want) {
		t.Errorf("test_write = %q (isError %v); want %q (isError %v)", text, isError, tt.want, tt.isError)
	}
	if got := ran.Load(); got != tt.runs {
		t.Errorf("handler ran %d times; want %d", got, tt.runs)
	}
	if el != nil && len(el.asked()) != tt.asks {
		t.Errorf("elicited %d times; want %d", len(el.asked()), tt.asks)
	}
	if seen != nil {
		p, ok := <-seen
		if ok != tt.viaQueued {
			t.Fatalf("queued: %v; want %v", ok, tt.viaQueued)
		}
		if ok && (p.Tool != "test.write" || string(p.Args) != `{"what":"x"}` || p.Profile != tt.profile) {
			t.Errorf("queued %+v", p)
		}
	}
	if ps, _ := q.List(context.Background()); len(ps) != 0 {
		t.Errorf("left in the queue: %v", ps)
	}
}

func TestConfirmViaConfig(t *testing.T) {
	for _, src := range []string{
		"[profiles.x]\nconfirm_via = [\"email\"]\n",
		"[profiles.x]\nconfirm_via = [\"console\", \"console\"]\n",
	} {
		if _, err := config.Parse("t.toml", src, nil); err == nil || !strings.Contains(err.Error(), "profiles.x.confirm_via") {
			t.Errorf("Parse(%q) = %v; want an error naming profiles.x.confirm_via", src, err)
		}
	}
}

// TestQueuedArgsCutAsAudited: a call's arguments wait in the queue cut
// as the audit log cuts them (one rule for both, so the console shows a
// waiting call as it shows the calls made): bounded, marked, with the
// full size.
func TestQueuedArgsCutAsAudited(t *testing.T) {
	var ran atomic.Int64
	home := t.TempDir()
	q := confirm.NewFileQueue(filepath.Join(home, "approvals"))
	c := connect(t, viaServer(t, &ran, home, ""), nil, "default")
	seen := decideWhenQueued(t, q, false)
	what := strings.Repeat("é", confirm.MaxQueuedArgs) // 2 bytes each
	call(t, c, "test_write", map[string]any{"what": what})
	p, ok := <-seen
	if !ok {
		t.Fatal("the call was not queued")
	}
	full := len(`{"what":""}`) + len(what)
	var s string
	if err := json.Unmarshal(p.Args, &s); err != nil {
		t.Fatalf("queued args %.80q…: want a JSON string (cut): %v", p.Args, err)
	}
	if p.ArgsBytes != full || len(s) > confirm.MaxQueuedArgs+64 || !strings.HasSuffix(s, fmt.Sprintf("…[cut: %d of %d bytes]", confirm.MaxQueuedArgs-1, full)) || !utf8.ValidString(s) {
		t.Errorf("queued args: %d bytes ending %q, ArgsBytes %d; want at most %d bytes, cut on a rune as audited, ArgsBytes %d", len(s), s[max(0, len(s)-40):], p.ArgsBytes, confirm.MaxQueuedArgs, full)
	}
}
