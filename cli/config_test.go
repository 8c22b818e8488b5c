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

// TestRealClientMCPJSON: a $BUB_HOME/mcp.json as Cline or Gemini CLI
// write it (their own fields, a disabled server) breaks no command:
// `call fs.read` and `config check` work, each with one warning naming
// every ignored field (not one per field or per server), and the check
// says which server is disabled.
func TestRealClientMCPJSON(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := `{"mcpServers": {
		"cline": {"command": "/nonexistent/cline", "autoApprove": ["x"], "timeout": 60, "disabled": true},
		"gemini": {"command": "/nonexistent/gemini", "trust": true}}}`
	if err := os.WriteFile(filepath.Join(home, "mcp.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"BUB_HOME": home}
	for _, tt := range []struct {
		args           []string
		stdout, stderr string // stdout's end; stderr substring
	}{
		{args: []string{"call", "--workspace", ws, "fs.read", "a.txt"}, stdout: "hi\n"},
		{args: []string{"config", "check", "--workspace", ws}, stdout: "ok\n", stderr: "msg=upstream.mcpjson.disabled file=" + filepath.Join(home, "mcp.json") + " upstream=cline\n"},
	} {
		code, out, errOut := runCLIEnv(t, vars, tt.args...)
		if code != 0 || !strings.HasSuffix(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 0, stdout ending %q, stderr with %q", tt.args, code, out, errOut, tt.stdout, tt.stderr)
		}
		var warnings []string
		for line := range strings.Lines(errOut) {
			if strings.Contains(line, "upstream.mcpjson.ignored") {
				warnings = append(warnings, line)
			}
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], `fields="cline.autoApprove, cline.timeout, gemini.trust"`) {
			t.Errorf("%q: warnings about ignored fields %q; want one naming cline.autoApprove, cline.timeout and gemini.trust", tt.args, warnings)
		}
	}
}
