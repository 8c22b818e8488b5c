package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConfigCheckFirstRunErrors: `bub-mcp config check` of a first
// mcp.json or [upstreams] table with a mistake says where (file, line,
// column in JSON, key path) and what to write, each layer of the message
// once: no Go type, no "upstream: upstream:", and a misspelt key named
// itself rather than as the key it misses.
func TestConfigCheckFirstRunErrors(t *testing.T) {
	for _, tc := range []struct {
		name, toml, mcpJSON string
		want                string // $HOME stands for the home directory
	}{{
		name:    "mcp.json args as a string",
		mcpJSON: "{\"mcpServers\": {\n  \"x\": {\"command\": \"a\", \"args\": \"-v\"}}}\n",
		want:    "app: module upstream: $HOME/mcp.json:2:33: mcpServers.x.args: want a list of strings, not a string",
	}, {
		name:    "mcp.json truncated",
		mcpJSON: "{\"mcpServers\": {\n  \"x\": {\"command\": \"a\"}",
		want:    "app: module upstream: $HOME/mcp.json:2:24: unexpected end of file: an object, list or string is not closed",
	}, {
		name: "bub.toml misspelt key",
		toml: "[upstreams.y]\ncomand = \"x\"\n",
		want: "app: module upstream: config: $HOME/bub.toml:2: upstreams.y.comand: unknown key; did you mean command?",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			for name, src := range map[string]string{"mcp.json": tc.mcpJSON, "bub.toml": tc.toml} {
				if src == "" && name == "mcp.json" { // an empty mcp.json is an error of its own
					continue
				}
				if err := os.WriteFile(filepath.Join(home, name), []byte(src), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := runBinary(t, agentEnv(home, ""), "", "config", "check", "--config", filepath.Join(home, "bub.toml"))
			want := "bub-mcp config check: " + strings.ReplaceAll(tc.want, "$HOME", home) + "\n"
			if code != 1 {
				t.Errorf("exit %d; want 1\nstdout: %s", code, stdout)
			}
			if diff := cmp.Diff(want, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}
