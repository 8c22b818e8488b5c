package mcpserver_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
)

// gateModule declares changing tools and, being provisioned before the
// server subscribes, holds each tool change at its own listener until
// the test lets it go: the moment after the registry and the Views
// changed and before the server's table did.
type gateModule struct{}

// gate is the test's hold on gateModule's listener.
var gate struct {
	entered chan struct{}
	release chan struct{}
}

func (gateModule) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "test.gate", New: func() app.Module { return gateModule{} }}
}

func (gateModule) Provision(ctx context.Context, a *app.App) error {
	a.EnableToolChanges()
	a.OnToolsChanged(func() {
		if gate.entered != nil {
			gate.entered <- struct{}{}
			<-gate.release
		}
	})
	return nil
}

func init() { app.RegisterModule(gateModule{}) }

// A tool that arrives while clients list and call (an upstream server's)
// is listed only once a call of it is dispatched: a list taken between
// the registry's change and the server's table catching up once showed
// it while calls of it failed as "not found".
func TestToolListedOnlyWhenCallable(t *testing.T) {
	cfg, err := config.Parse("test.toml", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	if err := reg.Register(echoTool()); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	h, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: reg, Modules: []string{"test.gate"}, Home: t.TempDir(), Workspace: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: cfg.ProfileNames()})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	c := connect(t, ts.URL+"/mcp", mcp.LATEST_PROTOCOL_VERSION, nil)

	late := registry.MustNewTool("test.late", "Arrives late.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return "late", nil
	})
	gate.entered, gate.release = make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { gate.entered, gate.release = nil, nil })
	updated := make(chan error, 1)
	go func() { updated <- h.UpdateTools(nil, []*registry.Tool{late}) }()
	<-gate.entered

	// Held: the registry has test.late, the server's table does not yet.
	for _, name := range toolNames(t, c) {
		if res, err := call(t, c, name, map[string]any{"message": "hi"}); err != nil || res.IsError {
			t.Errorf("%s is listed, but its call failed: %v %v", name, err, res)
		}
	}
	close(gate.release)
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	if got := toolNames(t, c); !slices.Contains(got, "test_late") {
		t.Fatalf("after the change: tools %v, want test_late among them", got)
	}
	res, err := call(t, c, "test_late", map[string]any{})
	if err != nil || res.IsError || text(res) != "late" {
		t.Fatalf("test_late: %v %v", err, res)
	}
}
