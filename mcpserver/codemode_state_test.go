package mcpserver_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestPerRequestCodeMode: _meta "bub/state" {"code_mode": true} on
// tools/list lists the code-mode View (preserved tools plus run_code), and
// on tools/call lets run_code run, for that request only; the session's
// setting (off) applies to requests without it.
func TestPerRequestCodeMode(t *testing.T) {
	testenv.MustHaveExec(t, "python3", "apt-get install python3")
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("orders.get", "Look up an order.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		ID string `json:"id"`
	}) (map[string]string, error) {
		return map[string]string{"id": in.ID, "status": "shipped"}, nil
	}))
	reg.MustRegister(registry.MustNewTool("fs.read", "Read.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return "", nil
	}, registry.WithPreserve()))
	cfg, err := config.Parse("test.toml", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	h, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: reg, Modules: []string{"codemode"}, Home: t.TempDir(), Workspace: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: cfg.ProfileNames(), CheckHosts: true})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	meta := func(state any) *mcp.Meta {
		if state == nil {
			return nil
		}
		return &mcp.Meta{AdditionalFields: map[string]any{mcpserver.StateMetaKey: state}}
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			c := connect(t, ts.URL+"/mcp", version, nil)
			lists := []struct {
				name  string
				state any
				want  []string
			}{
				{"code_mode true", map[string]any{"code_mode": true}, []string{"fs_read", "run_code"}},
				{"no state", nil, []string{"fs_read", "orders_get"}},
				{"code_mode false", map[string]any{"code_mode": false}, []string{"fs_read", "orders_get"}},
			}
			for _, tt := range lists {
				req := mcp.ListToolsRequest{}
				req.Params.Meta = meta(tt.state)
				res, err := c.ListTools(t.Context(), req)
				if err != nil {
					t.Fatalf("%s: tools/list: %v", tt.name, err)
				}
				var got []string
				for _, tool := range res.Tools {
					got = append(got, tool.Name)
				}
				slices.Sort(got)
				if !slices.Equal(got, tt.want) {
					t.Errorf("%s: tools/list = %v; want %v", tt.name, got, tt.want)
				}
			}
			call := mcp.CallToolRequest{}
			call.Params.Name = "run_code"
			call.Params.Arguments = map[string]any{"code": "o = await tools.orders_get(id='5')\nprint(o['status'])"}
			call.Params.Meta = meta(map[string]any{"code_mode": true})
			res, err := c.CallTool(t.Context(), call)
			if err != nil {
				t.Fatalf("run_code with code_mode=true: %v", err)
			}
			if text(res) != "shipped\n" || res.IsError {
				t.Errorf("run_code = %q (isError %v); want shipped", text(res), res.IsError)
			}
			call.Params.Meta = nil
			if res, err := c.CallTool(t.Context(), call); err == nil && !res.IsError {
				t.Errorf("run_code without the state = %q; want it refused (not in the View)", text(res))
			}
		})
	}
}
