package limits_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	_ "github.com/bubbuild/bub-mcp/sessions/pgstore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// replica is an App on src (over its own $BUB_HOME) served over HTTP, and
// an MCP client of it.
func replica(t *testing.T, src, ws string) *client.Client {
	t.Helper()
	home := t.TempDir()
	cfg, err := config.Parse(filepath.Join(home, "bub.toml"), src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Home: home, Workspace: ws, Modules: []string{"builtin", "limits"}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv, err := mcpserver.New(&mcpserver.Options{Backend: a, Registry: a.Registry(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h := streamhttp.New(srv, streamhttp.Options{Profiles: cfg.ProfileNames()})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { h.CloseSessions(context.Background()); ts.Close() })
	tr, err := transport.NewStreamableHTTP(ts.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "limits-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	return c
}

// A call over its limit reaches the client as a tool error whose result
// _meta carries retryAfterSeconds; with [store] kind = "postgres", two
// replicas share the bucket, so a burst spread over both is one burst.
func TestLimitOverTheWire(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const rule = "[audit]\nenabled = false\n\n[[limits]]\nname = \"reads\"\ntool = \"fs.read\"\nper_minute = 1\nburst = 2\n"
	read := func(c *client.Client) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name = "fs_read"
		req.Params.Arguments = map[string]any{"path": "a.txt"}
		res, err := c.CallTool(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	refused := func(t *testing.T, res *mcp.CallToolResult) {
		t.Helper()
		if !res.IsError || res.Meta == nil || fmt.Sprint(res.Meta.AdditionalFields["retryAfterSeconds"]) == "<nil>" {
			t.Fatalf("third read: isError %v, _meta %+v; want a tool error with retryAfterSeconds in _meta", res.IsError, res.Meta)
		}
		if got := fmt.Sprint(res.Meta.AdditionalFields["retryAfterSeconds"]); got != "60" && got != "59" {
			t.Errorf("retryAfterSeconds %s; want about 60", got)
		}
	}
	t.Run("one server", func(t *testing.T) {
		c := replica(t, rule, ws)
		for i := range 2 {
			if res := read(c); res.IsError {
				t.Fatalf("read %d: %v", i, res.Content)
			}
		}
		refused(t, read(c))
	})
	t.Run("two replicas on postgres", func(t *testing.T) {
		src := fmt.Sprintf("[store]\nkind = \"postgres\"\ndsn = %q\n\n", pgtest.DSN(t)) + rule
		a, b := replica(t, src, ws), replica(t, src, ws)
		if res := read(a); res.IsError {
			t.Fatalf("read on a: %v", res.Content)
		}
		if res := read(b); res.IsError {
			t.Fatalf("read on b: %v", res.Content)
		}
		refused(t, read(a))
	})
}
