package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// piped is srv's stdio transport served over two pipes, as a client
// process's pipes would be: write requests to in, read answers from out.
// Serve's error arrives on served; out then ends.
type piped struct {
	in     *io.PipeWriter
	out    *io.PipeReader
	outW   *io.PipeWriter
	served chan error
}

// servePiped starts stdio.Serve for srv with the default profile and
// shutdown grace; it runs until ctx ends or in is closed.
func servePiped(ctx context.Context, srv *mcpserver.Server, grace time.Duration) *piped {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &piped{in: inW, out: outR, outW: outW, served: make(chan error, 1)}
	go func() {
		p.served <- stdio.Serve(ctx, srv, inR, outW, providers.Connection{Profile: "default"}, grace)
		outW.Close()
	}()
	return p
}

// newHost is an App over reg with the bub.toml src and no modules, logging
// nowhere, in fresh directories; it closes with the test.
func newHost(tb testing.TB, reg *registry.Registry, src string) *app.App {
	tb.Helper()
	cfg, err := config.Parse("test.toml", src, func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	h, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: reg, Modules: []string{}, Home: tb.TempDir(), Workspace: tb.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	return h
}

// promptModule adds a filter whose prompt names the profile and its tool
// count, so tests can see instructions built per connection.
type promptModule struct{}

func (promptModule) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "test.prompt", New: func() app.Module { return promptModule{} }}
}

func (promptModule) Provision(ctx context.Context, a *app.App) error {
	a.AddFilter(func(ctx context.Context, conn *providers.Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
		return tools, "Profile " + conn.Profile + " has " + fmt.Sprint(len(tools)) + " tools.", nil
	})
	return nil
}

func init() { app.RegisterModule(promptModule{}) }

// newServer is an MCP server over h.
func newServer(tb testing.TB, h *app.App) *mcpserver.Server {
	tb.Helper()
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

// sampleTool is test.sample: it asks the client to sample its prompt once
// and returns the text.
func sampleTool() *registry.Tool {
	return registry.MustNewTool("test.sample", "Sample once.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Prompt string `json:"prompt"`
	}) (string, error) {
		res, err := tc.Sample(ctx, registry.SampleRequest{Messages: []registry.SampleMessage{{Role: "user", Text: in.Prompt}}})
		if err != nil {
			return "", err
		}
		return res.Text, nil
	})
}

// echoTool is test.echo: it returns its message.
func echoTool() *registry.Tool {
	return registry.MustNewTool("test.echo", "Echo.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Message string `json:"message"`
	}) (string, error) {
		return in.Message, nil
	})
}

// httpHandler is srv's HTTP handler with the function that closes its
// sessions, as the tests end them.
func httpHandler(srv *mcpserver.Server, o streamhttp.Options) (http.Handler, func(context.Context)) {
	h := streamhttp.New(srv, o)
	return h, h.CloseSessions
}
