package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// rootsHandler answers roots/list with one directory.
type rootsHandler struct{ dir string }

func (r rootsHandler) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file://" + filepath.ToSlash(r.dir), Name: "project"}}}, nil
}

// TestServeWorkspaceFromRoots: `serve` without --workspace (what install
// writes into the files every project shares) works in the client's MCP
// root, over stdio and in an HTTP 2025 session; without roots, in the
// directory the client started it in. (That --workspace wins over roots
// is mcpserver's TestStdioWorkspaceFromRoots: a root that is never asked
// for cannot be waited for here.)
func TestServeWorkspaceFromRoots(t *testing.T) {
	cwd, root := t.TempDir(), t.TempDir()
	for dir, text := range map[string]string{cwd: "cwd", root: "root"} {
		if err := os.WriteFile(filepath.Join(dir, "where.txt"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		http  bool
		roots bool
		want  string
	}{
		{"stdio, roots", false, true, "root"},
		{"stdio, no roots", false, false, "cwd"},
		{"http, roots", true, true, "root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := agentEnv(t.TempDir(), "")
			var opts []client.ClientOption
			if tc.roots {
				opts = append(opts, client.WithRootsHandler(rootsHandler{root}))
			}
			opts = append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
			var c *client.Client
			if tc.http {
				cmd := exec.Command(binary(t), "serve", "--http", "127.0.0.1:0")
				cmd.Dir, cmd.Env = cwd, env
				url := serveHTTP(t, cmd)
				//lint:ignore SA1019 the 2025 session protocol on purpose: it carries roots/list
				tr, err := transport.NewStreamableHTTP(url, transport.WithContinuousListening())
				if err != nil {
					t.Fatal(err)
				}
				c = client.NewClient(tr, opts...)
			} else {
				tr := transport.NewStdioWithOptions(binary(t), env, []string{"serve"},
					transport.WithCommandFunc(func(_ context.Context, command string, env, args []string) (*exec.Cmd, error) {
						cmd := exec.Command(command, args...)
						cmd.Dir, cmd.Env = cwd, env
						return cmd, nil
					}))
				c = client.NewClient(tr, opts...)
			}
			if err := c.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
			init.Params.ClientInfo = mcp.Implementation{Name: "roots-test", Version: "1"}
			if _, err := c.Initialize(t.Context(), init); err != nil {
				t.Fatal(err)
			}
			// The server asks roots/list after notifications/initialized
			// and keeps the answer as it comes: read until it shows, or
			// the deadline (which only guards against a hang) passes.
			var got string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				res, err := callTool(t.Context(), c, "fs_read", map[string]any{"path": "where.txt"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				got = resultText(res)
				if got == tc.want || got == tc.want+"\n" || time.Now().After(deadline) {
					break
				}
			}
			if got != tc.want && got != tc.want+"\n" {
				t.Errorf("fs.read where.txt = %q; want %q", got, tc.want)
			}
		})
	}
}
