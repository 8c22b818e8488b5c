package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestExampleConfigServes: bub.toml.example copied to $BUB_HOME/bub.toml,
// as a new user would, serves /mcp without locking them out (no live
// token) and lists tools.
func TestExampleConfigServes(t *testing.T) {
	home := t.TempDir()
	src, err := os.ReadFile("../bub.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "bub.toml"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "serve", "--http", "127.0.0.1:0")
	cmd.Dir = t.TempDir()
	cmd.Env = agentEnv(home, "")
	url := serveHTTP(t, cmd)
	c := httpClient(t, url) // fails on 401
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil || len(res.Tools) == 0 {
		t.Fatalf("tools/list with the example configuration: %v, %v", res, err)
	}
}
