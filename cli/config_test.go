package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheck: config check and serve --check load bub.toml and
// $BUB_HOME/mcp.json as serve does and exit 0 saying which files they
// read, or 1 with the error naming the file, without serving.
func TestConfigCheck(t *testing.T) {
	ws := t.TempDir()
	tests := []struct {
		name, toml, mcpJSON string
		args                []string
		code                int
		out, err            string // substrings
	}{
		{name: "zero configuration", args: []string{"config", "check"}, out: "bub.toml: (none: the zero configuration)\nmcp.json: HOME/mcp.json (absent)\nprofiles: 1\nok\n"},
		{name: "valid files", toml: "[profiles.ro]\ntools = [\"fs.*\"]\n", mcpJSON: `{"mcpServers": {"x": {"command": "/no/such/server"}}}`,
			args: []string{"serve", "--check"}, out: "bub.toml: CFG\nmcp.json: HOME/mcp.json\nprofiles: 2\nok\n"},
		{name: "misspelt key", toml: "[server]\nmax_mesage_bytes = 5\n", args: []string{"config", "check"}, code: 1, err: "CFG:2: server.max_mesage_bytes"},
		{name: "bad mcp.json", mcpJSON: `{"mcpServers": {"x": {"type": "carrier-pigeon", "command": "x"}}}`, args: []string{"serve", "--check"}, code: 1, err: `mcpServers.x.type: unknown type "carrier-pigeon"`},
		{name: "open bind without auth", args: []string{"serve", "--check", "--http", "0.0.0.0:0"}, code: 1, err: "refusing to serve 0.0.0.0:0 without auth"},
		{name: "missing profile workspace", toml: "[profiles.gone]\nworkspace = \"/no/such/dir\"\n", args: []string{"config", "check"}, code: 1, err: "profiles.gone.workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			cfg := filepath.Join(t.TempDir(), "bub.toml")
			vars := map[string]string{"BUB_HOME": home}
			if tt.toml != "" {
				os.WriteFile(cfg, []byte(tt.toml), 0o600)
				vars["BUB_CONFIG"] = cfg
			}
			if tt.mcpJSON != "" {
				os.WriteFile(filepath.Join(home, "mcp.json"), []byte(tt.mcpJSON), 0o600)
			}
			fill := strings.NewReplacer("HOME", home, "CFG", cfg)
			code, out, stderr := runCLIEnv(t, vars, append(tt.args, "--workspace", ws)...)
			if code != tt.code || !strings.Contains(out, fill.Replace(tt.out)) || !strings.Contains(stderr, fill.Replace(tt.err)) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", code, out, stderr, tt.code, fill.Replace(tt.out), fill.Replace(tt.err))
			}
		})
	}
}
