package mcpserver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestOnePipeline checks that every tools/call of every era and transport
// goes through mcp-go's request handling: tool middleware and hooks
// installed on it see each call (a side road once skipped both).
func TestOnePipeline(t *testing.T) {
	var middleware, hooked atomic.Int64
	reg := registry.New()
	reg.MustRegister(echoTool())
	h := newHost(t, reg, "")
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Installed on the SDK's server before anything is served.
	srv.MCP().GetHooks().AddBeforeCallTool(func(ctx context.Context, id any, req *mcp.CallToolRequest) { hooked.Add(1) })
	srv.MCP().Use(func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			middleware.Add(1)
			return next(ctx, req)
		}
	})
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closeSessions(ctx)
		ts.Close()
	})
	ctx := t.Context()
	stdioClient := func(version string) *client.Client {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		sctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		go stdio.Serve(sctx, srv, inR, outW, providers.Connection{Profile: "default"}, time.Second)
		c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(nil)), client.WithProtocolVersion(version))
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	clients := map[string]*client.Client{
		"stdio " + legacy: stdioClient(legacy),
		"stdio " + modern: stdioClient(modern),
		"http " + legacy:  connect(t, ts.URL+"/mcp", legacy, nil),
		"http " + modern:  connect(t, ts.URL+"/mcp", modern, nil),
	}
	for name, c := range clients {
		before, beforeHook := middleware.Load(), hooked.Load()
		res, err := call(t, c, "test_echo", map[string]any{"message": "hi"})
		if err != nil || res.IsError || text(res) != "hi" {
			t.Fatalf("%s: test_echo = %+v, %v", name, res, err)
		}
		if got := middleware.Load() - before; got != 1 {
			t.Errorf("%s: middleware ran %d times for one call; want 1", name, got)
		}
		if got := hooked.Load() - beforeHook; got != 1 {
			t.Errorf("%s: BeforeCallTool hook ran %d times for one call; want 1", name, got)
		}
	}
}
