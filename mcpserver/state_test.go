package mcpserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestCallerStateFromMeta: an MCP client's _meta "bub/state" reaches the
// tool as ToolContext.State, on both protocol eras; a non-object is a
// clear tool error.
func TestCallerStateFromMeta(t *testing.T) {
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("state.show", "Show the request id.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return fmt.Sprintf("request_id=%v", tc.State["request_id"]), nil
	}))
	cfg, err := config.Parse("test.toml", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	h, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: reg, Modules: []string{}, Home: t.TempDir(), Workspace: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: cfg.ProfileNames(), CheckHosts: true})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			c := connect(t, ts.URL+"/mcp", version, nil)
			for _, tt := range []struct {
				meta    any
				want    string
				isError bool
			}{
				{map[string]any{"request_id": "req-01"}, "request_id=req-01", false},
				{nil, "request_id=<nil>", false},
				{"req-01", `[invalid_input] _meta "bub/state" must be a JSON object`, true},
			} {
				req := mcp.CallToolRequest{}
				req.Params.Name = "state_show"
				if tt.meta != nil {
					req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{mcpserver.StateMetaKey: tt.meta}}
				}
				res, err := c.CallTool(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				if text(res) != tt.want || res.IsError != tt.isError {
					t.Errorf("state %v: %q (isError %v); want %q (isError %v)", tt.meta, text(res), res.IsError, tt.want, tt.isError)
				}
			}
		})
	}
}
