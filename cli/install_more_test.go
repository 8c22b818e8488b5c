package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"github.com/tailscale/hujson"
)

// runBinaryIn is runBinary in the working directory dir.
func runBinaryIn(t *testing.T, dir string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// readServers decodes a client's file (JSON with comments, or TOML) and
// returns its servers table.
func readServers(t *testing.T, path, key string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{}
	if strings.HasSuffix(path, ".toml") {
		_, err = toml.Decode(string(b), &doc)
	} else {
		var std []byte
		if std, err = hujson.Standardize(b); err == nil {
			err = json.Unmarshal(std, &doc)
		}
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	servers, _ := doc[key].(map[string]any)
	return servers
}

// TestInstallWorkspaceDefaults: without --workspace, the files every
// project shares get no workspace (serve works where the client starts
// it), VS Code gets ${workspaceFolder}, Claude Code's project scope
// writes .mcp.json in the workspace without one, and Claude Desktop (no
// project of its own) the current directory. The README's first example
// (flags after the client) works.
func TestInstallWorkspaceDefaults(t *testing.T) {
	bin, err := filepath.EvalSymlinks(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	other := t.TempDir()
	tests := []struct {
		args []string
		file string // under home; "WS/..." under ws, "OTHER/..." under other
		key  string
		want []any
	}{
		{[]string{"claude-code"}, ".claude.json", "mcpServers", []any{"serve"}},
		{[]string{"cursor"}, ".cursor/mcp.json", "mcpServers", []any{"serve"}},
		{[]string{"gemini-cli"}, ".gemini/settings.json", "mcpServers", []any{"serve"}},
		{[]string{"codex"}, ".codex/config.toml", "mcp_servers", []any{"serve"}},
		{[]string{"vscode"}, "WS/.vscode/mcp.json", "servers", []any{"serve", "--workspace", "${workspaceFolder}"}},
		{[]string{"claude-code", "--scope", "project"}, "WS/.mcp.json", "mcpServers", []any{"serve"}},
		{[]string{"claude-desktop"}, ".config/Claude/claude_desktop_config.json", "mcpServers", []any{"serve", "--workspace", ws}},
		{[]string{"claude-desktop", "--workspace", other}, ".config/Claude/claude_desktop_config.json", "mcpServers", []any{"serve", "--workspace", other}},
		{[]string{"cursor", "--workspace", other, "--profile", "ro"}, ".cursor/mcp.json", "mcpServers", []any{"serve", "--workspace", other, "--profile", "ro"}},
		{[]string{"claude-code", "--scope", "project", "--workspace", other}, "OTHER/.mcp.json", "mcpServers", []any{"serve", "--workspace", other}},
	}
	for _, tt := range tests {
		home := t.TempDir()
		env := append(agentEnv(home, ""), "HOME="+home, "XDG_CONFIG_HOME=", "CODEX_HOME=")
		code, stdout, stderr := runBinaryIn(t, ws, env, append([]string{"install"}, tt.args...)...)
		if code != 0 {
			t.Errorf("install %q: exit %d, %s%s", tt.args, code, stdout, stderr)
			continue
		}
		path := filepath.Join(home, tt.file)
		if rest, ok := strings.CutPrefix(tt.file, "WS/"); ok {
			path = filepath.Join(ws, rest)
		} else if rest, ok := strings.CutPrefix(tt.file, "OTHER/"); ok {
			path = filepath.Join(other, rest)
		}
		got := readServers(t, path, tt.key)["bub"]
		entry, _ := got.(map[string]any)
		if diff := cmp.Diff(tt.want, entry["args"]); diff != "" || entry["command"] != bin {
			t.Errorf("install %q: %s holds %v; args (-want +got):\n%s", tt.args, path, got, diff)
		}
		os.RemoveAll(filepath.Join(ws, ".vscode"))
		os.Remove(filepath.Join(ws, ".mcp.json"))
	}
}

// TestInstallKeepsComments: JSON with comments and trailing commas (VS
// Code's and Gemini CLI's settings) and Codex's commented TOML keep
// every comment and comma when the entry is added or replaced, and a
// second install replaces the entry rather than adding one.
func TestInstallKeepsComments(t *testing.T) {
	ws := t.TempDir()
	tests := []struct {
		client, file, key, old string
		keep                   []string // substrings the file keeps
	}{
		{"vscode", "WS/.vscode/mcp.json", "servers",
			"{\n  // my servers\n  \"servers\": {\n    \"a\": {\"type\": \"http\", \"url\": \"http://x/*y*/\"}, // the first\n  },\n  /* block */ \"x\": [1, 2,],\n}\n",
			[]string{"  // my servers\n", `"a": {"type": "http", "url": "http://x/*y*/"}, // the first` + "\n", `/* block */ "x": [1, 2,],` + "\n}\n"}},
		{"gemini-cli", ".gemini/settings.json", "mcpServers",
			"{\n\t// Gemini\n\t\"theme\": \"GitHub\", // dark later\n\t\"n\": 12345678901234567890,\n}\n",
			[]string{"\t// Gemini\n", "\t\"theme\": \"GitHub\", // dark later\n", "12345678901234567890,\n\t\"mcpServers\": {\n\t\t\"bub\": {\n"}},
		{"cursor", ".cursor/mcp.json", "mcpServers",
			`{"mcpServers":{"other":{"command":"x"}}}`,
			[]string{`{"mcpServers":{"other":{"command":"x"}, "bub":`}},
		{"codex", ".codex/config.toml", "mcp_servers",
			"# my codex\nmodel = \"o3\" # best\n\n[mcp_servers.bub]\ncommand = \"old\"\n[mcp_servers.bub.env]\nK = \"v\"\n\n# the other one\n[mcp_servers.other]\ncommand = \"x\" # keep\n",
			[]string{"# my codex\nmodel = \"o3\" # best\n\n[mcp_servers.bub]\n", "\n# the other one\n[mcp_servers.other]\ncommand = \"x\" # keep\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.client, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, tt.file)
			if rest, ok := strings.CutPrefix(tt.file, "WS/"); ok {
				path = filepath.Join(ws, rest)
			}
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(tt.old), 0o600); err != nil {
				t.Fatal(err)
			}
			env := append(agentEnv(home, ""), "HOME="+home, "XDG_CONFIG_HOME=", "CODEX_HOME=")
			for _, profile := range []string{"one", "two"} {
				if code, stdout, stderr := runBinaryIn(t, ws, env, "install", tt.client, "--profile", profile); code != 0 {
					t.Fatalf("install: exit %d, %s%s", code, stdout, stderr)
				}
			}
			b, _ := os.ReadFile(path)
			for _, k := range tt.keep {
				if !strings.Contains(string(b), k) {
					t.Errorf("%s lost %q:\n%s", path, k, b)
				}
			}
			servers := readServers(t, path, tt.key)
			args, _ := servers["bub"].(map[string]any)["args"].([]any)
			if len(args) < 2 || args[len(args)-1] != "two" {
				t.Errorf("bub's args %v; want the second install's (--profile two)", args)
			}
			if strings.Count(string(b), `"bub"`)+strings.Count(string(b), "[mcp_servers.bub]") != 1 {
				t.Errorf("bub appears more than once:\n%s", b)
			}
			if strings.Contains(string(b), "K = ") || strings.Contains(string(b), `"old"`) {
				t.Errorf("the old entry's keys survived:\n%s", b)
			}
		})
	}
}

// TestInstallHeaders: --header goes into each client's HTTP entry, in
// the client's own key; it needs --http and a Name:value.
func TestInstallHeaders(t *testing.T) {
	home := t.TempDir()
	env := append(agentEnv(home, ""), "HOME="+home)
	url := "http://127.0.0.1:8080/mcp"
	h := map[string]any{"Authorization": "Bearer t0k&n", "X-Team": "a"}
	tests := []struct {
		client string
		want   map[string]any
	}{
		{"claude-code", map[string]any{"type": "http", "url": url, "headers": h}},
		{"vscode", map[string]any{"type": "http", "url": url, "headers": h}},
		{"cursor", map[string]any{"url": url, "headers": h}},
		{"gemini-cli", map[string]any{"httpUrl": url, "headers": h}},
		{"codex", map[string]any{"url": url, "http_headers": h}},
		{"claude-desktop", map[string]any{"command": "npx", "args": []any{"-y", "mcp-remote", url, "--header", "Authorization:Bearer t0k&n", "--header", "X-Team:a"}}},
	}
	for _, tt := range tests {
		code, stdout, stderr := runBinary(t, env, "", "install", tt.client, "--print", "--http", url, "--header", "Authorization: Bearer t0k&n", "--header", "X-Team:a")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tt.client, code, stderr)
		}
		doc := map[string]any{}
		var err error
		if tt.client == "codex" {
			_, err = toml.Decode(stdout, &doc)
			doc = map[string]any{"s": doc["mcp_servers"]}
		} else {
			var m map[string]map[string]any
			err = json.Unmarshal([]byte(stdout), &m)
			for _, v := range m {
				doc["s"] = v
			}
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", tt.client, err, stdout)
		}
		if diff := cmp.Diff(tt.want, doc["s"].(map[string]any)["bub"]); diff != "" {
			t.Errorf("%s entry (-want +got):\n%s", tt.client, diff)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "cursor", "--header", "A:b"}, "--header applies to --http entries only"},
		{[]string{"install", "cursor", "--http", url, "--header", "no colon"}, `--header "no colon": want Name:value`},
		{[]string{"install", "cursor", "--scope", "project"}, `--scope "project": only claude-code has scopes`},
		{[]string{"install", "claude-code", "--scope", "local"}, `--scope "local": want user or project`},
		{[]string{"install", "cursor", "--name", "a.b"}, `--name "a.b": want a short name`},
	} {
		if code, _, stderr := runBinary(t, env, "", tt.args...); code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
