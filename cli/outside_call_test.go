package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCallToolOfUpstreamNotReady: calling a tool of an upstream server
// that did not start says so, with the server's state and error, instead
// of "unknown tool name", which sends the user looking for a typo; a name
// no server claims is still an unknown tool.
func TestCallToolOfUpstreamNotReady(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "mcp.json"), []byte(`{"mcpServers": {"x": {"command": "sh", "args": ["-c", "exit 3"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool, want, not string
	}{
		{"x.foo", "tool x.foo is unknown because upstream x is not ready (", "unknown tool name"},
		{"x_foo", "tool x_foo is unknown because upstream x is not ready (", "unknown tool name"},
		{"y.foo", "unknown tool name(s): 'y.foo'", "not ready"},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, agentEnv(home, ""), "", "call", "--workspace", t.TempDir(), tt.tool)
			if code != 1 || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, tt.not) {
				t.Errorf("exit %d; want 1 with %q, without %q\nstdout: %s\nstderr: %s", code, tt.want, tt.not, stdout, stderr)
			}
		})
	}
}
