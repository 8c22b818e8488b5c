package mcpserver_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/host"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/registry"
)

// newHost is a host over reg with the bub.toml src, logging nowhere, in
// fresh directories; it closes with the test.
func newHost(tb testing.TB, reg *registry.Registry, src string) *host.Host {
	tb.Helper()
	cfg, err := config.Parse("test.toml", src, func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	h, err := host.New(&host.Options{Config: cfg, Registry: reg, Home: tb.TempDir(), Workspace: tb.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	return h
}

// newServer is an MCP server over h.
func newServer(tb testing.TB, h *host.Host) *mcpserver.Server {
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
