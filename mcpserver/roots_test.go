package mcpserver_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	_ "github.com/bubbuild/bub-mcp/builtin" // fs.read
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// rootsClient answers roots/list with its roots and counts the questions.
type rootsClient struct {
	roots []mcp.Root
	asked chan struct{}
}

func (r *rootsClient) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	defer func() { r.asked <- struct{}{} }()
	return &mcp.ListRootsResult{Roots: r.roots}, nil
}

// TestStdioWorkspaceFromRoots: without a configured workspace, a stdio
// client that declares roots has its first file:// directory root as the
// workspace (fs.read of a relative path reads there); without roots, or
// with a workspace the operator chose, the App's workspace stays.
func TestStdioWorkspaceFromRoots(t *testing.T) {
	cwd, rootDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "where.txt"), []byte("cwd"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootDir, "where.txt"), []byte("root"), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := []mcp.Root{
		{URI: "https://example.com/not-a-file", Name: "web"},
		{URI: "file://" + filepath.Join(rootDir, "missing"), Name: "gone"},
		{URI: "file://" + filepath.ToSlash(rootDir), Name: "project"},
	}
	for _, tc := range []struct {
		name     string
		roots    bool // the client declares roots
		operator bool // the operator chose the workspace (RootsWorkspace says no)
		want     string
	}{
		{"roots", true, false, "root"},
		{"no roots capability", false, false, "cwd"},
		{"operator's workspace wins", true, true, "cwd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("test.toml", "", func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			log := slog.New(slog.DiscardHandler)
			h, err := app.New(t.Context(), &app.Options{Config: cfg, Modules: []string{"builtin"}, Home: t.TempDir(), Workspace: cwd, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: log,
				RootsWorkspace: func(profile string) bool { return profile == "default" && !tc.operator }})
			if err != nil {
				t.Fatal(err)
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go func() { _ = stdio.Serve(ctx, srv, inR, outW, providers.Connection{Profile: "default"}, time.Second) }()
			rc := &rootsClient{roots: roots, asked: make(chan struct{}, 4)}
			opts := []client.ClientOption{client.WithProtocolVersion(legacy)}
			if tc.roots {
				opts = append(opts, client.WithRootsHandler(rc))
			}
			c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(nil)), opts...)
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
				t.Fatal(err)
			}
			if tc.roots && !tc.operator {
				select {
				case <-rc.asked:
				case <-time.After(10 * time.Second):
					t.Fatal("the server never asked for roots after notifications/initialized")
				}
			}
			read := func() string {
				t.Helper()
				var res *mcp.CallToolResult
				// The answer is stored just after it is read.
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					req := mcp.CallToolRequest{}
					req.Params.Name, req.Params.Arguments = "fs_read", map[string]any{"path": "where.txt"}
					if res, err = c.CallTool(ctx, req); err != nil {
						t.Fatal(err)
					}
					if callText(res) == tc.want+"\n" || callText(res) == tc.want || time.Now().After(deadline) {
						return callText(res)
					}
				}
			}
			if got := read(); got != tc.want && got != tc.want+"\n" {
				t.Fatalf("fs.read where.txt = %q, want %q", got, tc.want)
			}
			if !tc.roots || tc.operator {
				return
			}
			// roots/list_changed: asked again; a root list without a
			// directory brings the App's workspace back.
			rc.roots = []mcp.Root{{URI: "https://example.com/", Name: "web"}}
			if err := c.RootListChanges(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-rc.asked:
			case <-time.After(10 * time.Second):
				t.Fatal("the server never asked for roots after notifications/roots/list_changed")
			}
			tc.want = "cwd"
			if got := read(); got != "cwd" && got != "cwd\n" {
				t.Fatalf("after list_changed: fs.read where.txt = %q, want %q", got, "cwd")
			}
		})
	}
}

// callText is a tool result's first text content.
func callText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}
