package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagsAnywhere: every command takes its flags before or after its
// arguments (Go's flag package stopped at the first argument, so
// `install claude-desktop --workspace DIR` said "name one client"), and
// the single-dash long flags of Go's flag package still work.
func TestFlagsAnywhere(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args   []string
		stdout string // substring
	}{
		{[]string{"install", "claude-desktop", "--workspace", ws, "--print"}, `"--workspace",` + "\n        \"" + ws + `"`},
		{[]string{"call", "fs.read", "a.txt", "--workspace", ws, "limit=1"}, "one\n"},
		{[]string{"call", "fs.read", "a.txt", "--workspace", ws, "--json"}, `"eof": true`},
		{[]string{"call", "-workspace", ws, "-json", "fs.read", "a.txt"}, `"eof": true`},
		{[]string{"call", "-workspace=" + ws, "fs.read", "a.txt", "offset=1"}, "two\n"},
		{[]string{"agent", ",fs.read path=a.txt limit=1", "--workspace", ws}, "one\n"},
		{[]string{"tools", "--json", "--workspace", ws}, `"name": "fs.read"`},
		{[]string{"upstreams", "--workspace", ws}, "no upstream servers"},
		{[]string{"config", "check", "--workspace", ws}, "ok\n"},
		{[]string{"version"}, "bub-mcp "},
	}
	for _, tt := range tests {
		code, out, errOut := runCLIEnv(t, map[string]string{"BUB_HOME": home, "HOME": home}, tt.args...)
		if code != 0 || !strings.Contains(out, tt.stdout) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 0 and %q", tt.args, code, out, errOut, tt.stdout)
		}
	}
}

// TestHelpAndUsage: `help CMD` prints the command's help on stdout, an
// unknown command or flag is a usage error (exit 2) with did-you-mean
// suggestions, and a bare bub-mcp prints the usage to stderr with
// status 2.
func TestHelpAndUsage(t *testing.T) {
	tests := []struct {
		args           []string
		code           int
		stdout, stderr string // substrings
	}{
		{args: []string{"help", "install"}, stdout: "Usage:\n  bub-mcp install [flags] CLIENT\n"},
		{args: []string{"help", "install"}, stdout: "--workspace string"},
		{args: []string{"install", "--help"}, stdout: "bub-mcp install [flags] CLIENT"},
		{args: []string{"help", "config", "check"}, stdout: "bub-mcp config check [flags]"},
		{args: []string{"help", "upstreams"}, stdout: "exits 1 naming every server that\nfailed to start, with its error."},
		{args: []string{"help"}, stdout: "Available Commands:"},
		{args: []string{"help", "instal"}, code: 2, stderr: `unknown command "instal"; did you mean install?`},
		{args: []string{"instal", "cursor"}, code: 2, stderr: `bub-mcp: unknown command "instal"; did you mean install?`},
		{args: []string{"srve"}, code: 2, stderr: "did you mean serve?"},
		{args: []string{"config", "chek"}, code: 2, stderr: `unknown command "chek" for bub-mcp config; did you mean check?`},
		{args: []string{"tools", "--jsno"}, code: 2, stderr: "bub-mcp tools: unknown flag: --jsno; did you mean --json?\nusage: bub-mcp tools [flags]\n"},
		{args: []string{"tools", "extra"}, code: 2, stderr: `bub-mcp tools: unexpected arguments ["extra"]`},
		{args: []string{"install"}, code: 2, stderr: "name one client"},
		{args: []string{}, code: 2, stderr: "Available Commands:"},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, t.TempDir(), tt.args...)
		if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", tt.args, code, out, errOut, tt.code, tt.stdout, tt.stderr)
		}
	}
}

// TestCompletion: `completion bash` writes a bash completion script, and
// the script's helper completes commands, install's clients and flags.
func TestCompletion(t *testing.T) {
	code, out, errOut := runCLI(t, t.TempDir(), "completion", "bash")
	if code != 0 || !strings.Contains(out, "__start_bub-mcp") || !strings.Contains(out, "complete -o default -F __start_bub-mcp bub-mcp") {
		t.Fatalf("completion bash: exit %d, stderr %q; stdout lacks the bash script:\n%.300s", code, errOut, out)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "ins"}, []string{"install\t"}},
		{[]string{"__complete", "install", "cl"}, []string{"claude-code", "claude-desktop"}},
		{[]string{"__complete", "call", "--js"}, []string{"--json\t"}},
		{[]string{"__complete", "help", "up"}, []string{"upstreams\t"}},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, t.TempDir(), tt.args...)
		for _, w := range tt.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tt.args, code, out, errOut, w)
			}
		}
	}
}
