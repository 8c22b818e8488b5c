package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"github.com/tailscale/hujson"
)

// TestInstall writes each client's configuration under a temporary home
// with the built binary: the entry runs this binary's serve with the
// --workspace given (VS Code: ${workspaceFolder}, the file being in the
// workspace), or points at --http; what the file held is kept and
// backed up, and --print writes nothing.
func TestInstall(t *testing.T) {
	bin, err := filepath.EvalSymlinks(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	stdio := []any{"serve", "--workspace", ws, "--profile", "coder"}
	vscode := []any{"serve", "--workspace", "${workspaceFolder}", "--profile", "coder"}
	tests := []struct {
		client string
		file   string // under home (vscode: under the workspace)
		old    string
		want   map[string]any // the servers table afterwards
		key    string
	}{
		{"claude-desktop", ".config/Claude/claude_desktop_config.json", `{"mcpServers":{"other":{"command":"x"}},"theme":"dark"}`,
			map[string]any{"other": map[string]any{"command": "x"}, "bub": map[string]any{"command": bin, "args": stdio}}, "mcpServers"},
		{"claude-code", ".claude.json", `{"numStartups": 12345678901234567890, "mcpServers": {}}`,
			map[string]any{"bub": map[string]any{"type": "stdio", "command": bin, "args": stdio}}, "mcpServers"},
		{"vscode", ".vscode/mcp.json", "{\n  // my servers\n  \"servers\": {\"a\": {\"type\": \"http\", \"url\": \"http://x/*y*/\"}}\n}\n",
			map[string]any{"a": map[string]any{"type": "http", "url": "http://x/*y*/"}, "bub": map[string]any{"type": "stdio", "command": bin, "args": vscode}}, "servers"},
		{"cursor", ".cursor/mcp.json", "",
			map[string]any{"bub": map[string]any{"command": bin, "args": stdio}}, "mcpServers"},
		{"gemini-cli", ".gemini/settings.json", `{"theme":"GitHub"}`,
			map[string]any{"bub": map[string]any{"command": bin, "args": stdio}}, "mcpServers"},
		{"codex", ".codex/config.toml", "model = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n",
			map[string]any{"other": map[string]any{"command": "x"}, "bub": map[string]any{"command": bin, "args": stdio}}, "mcp_servers"},
	}
	for _, tt := range tests {
		t.Run(tt.client, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, tt.file)
			if tt.client == "vscode" {
				path = filepath.Join(ws, tt.file)
				os.RemoveAll(filepath.Join(ws, ".vscode"))
			}
			if tt.old != "" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(tt.old), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			env := append(agentEnv(home, ""), "HOME="+home, "XDG_CONFIG_HOME=", "CODEX_HOME=")
			code, stdout, stderr := runBinary(t, env, "", "install", "--print", "--workspace", ws, "--profile", "coder", tt.client)
			if code != 0 || !strings.Contains(stdout, bin) || !strings.Contains(stderr, path) {
				t.Fatalf("--print: exit %d, %q, %q", code, stdout, stderr)
			}
			if b, _ := os.ReadFile(path); string(b) != tt.old {
				t.Fatalf("--print changed %s", path)
			}
			code, stdout, stderr = runBinary(t, env, "", "install", "--workspace", ws, "--profile", "coder", tt.client)
			if code != 0 || !strings.Contains(stdout, path) {
				t.Fatalf("install: exit %d, %q, %q", code, stdout, stderr)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			doc := map[string]any{}
			if strings.HasSuffix(path, ".toml") {
				_, err = toml.Decode(string(b), &doc)
			} else {
				var std []byte
				if std, err = hujson.Standardize(append([]byte(nil), b...)); err == nil {
					err = json.Unmarshal(std, &doc)
				}
			}
			if err != nil {
				t.Fatalf("%s after install: %v\n%s", path, err, b)
			}
			if diff := cmp.Diff(tt.want, doc[tt.key]); diff != "" {
				t.Errorf("servers (-want +got):\n%s", diff)
			}
			for k := range doc { // the rest of the file is kept
				if k != tt.key && !strings.Contains(tt.old, `"`+k+`"`) && !strings.Contains(tt.old, k+" =") {
					t.Errorf("install added %q", k)
				}
			}
			if strings.Contains(tt.old, "numStartups") && !strings.Contains(string(b), "12345678901234567890") {
				t.Errorf("a large number was not kept exactly:\n%s", b)
			}
			backups, _ := filepath.Glob(path + ".bak-*")
			if tt.old != "" {
				if len(backups) != 1 {
					t.Fatalf("backups %v; want one", backups)
				}
				if old, _ := os.ReadFile(backups[0]); string(old) != tt.old {
					t.Errorf("backup holds %q", old)
				}
				if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
					t.Errorf("mode %v; want the old file's 0640", st.Mode().Perm())
				}
			} else if len(backups) != 0 {
				t.Errorf("backups %v of a file that did not exist", backups)
			}
		})
	}
}

func TestInstallHTTPAndErrors(t *testing.T) {
	home := t.TempDir()
	env := append(agentEnv(home, ""), "HOME="+home)
	code, stdout, stderr := runBinary(t, env, "", "install", "--print", "--http", "http://127.0.0.1:8080/mcp", "--profile", "readonly", "claude-code")
	want := "{\n  \"mcpServers\": {\n    \"bub\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:8080/mcp/p/readonly\"\n    }\n  }\n}\n"
	if code != 0 || stdout != want {
		t.Errorf("--http --print: exit %d, %q (%s); want %q", code, stdout, stderr, want)
	}
	bad := filepath.Join(home, ".cursor", "mcp.json")
	os.MkdirAll(filepath.Dir(bad), 0o755)
	os.WriteFile(bad, []byte("{not json"), 0o600)
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"install", "nosuch"}, 2, `unknown client "nosuch" (known: claude-code, claude-desktop, codex, cursor, gemini-cli, vscode)`},
		{[]string{"install"}, 2, "name one client"},
		{[]string{"install", "--workspace", "/no/such", "cursor"}, 1, "workspace /no/such (--workspace) does not exist"},
		{[]string{"install", "--http", "127.0.0.1:8080", "cursor"}, 2, "want a URL"},
		{[]string{"install", "--workspace", home, "cursor"}, 1, bad + " is not valid JSON"},
	} {
		code, _, stderr := runBinary(t, env, "", tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, %q; want exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
	if b, _ := os.ReadFile(bad); string(b) != "{not json" {
		t.Errorf("a file install could not read was changed: %q", b)
	}
}
