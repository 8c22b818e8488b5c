package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkspaceTilde: a --workspace starting with ~ is the home directory's,
// as bub.toml's workspace keys are; a client starts serve without a shell,
// so "~/project" in its JSON arrives unexpanded (as --workspace=~/x does
// from bash).
func TestWorkspaceTilde(t *testing.T) {
	home := t.TempDir()
	proj := filepath.Join(home, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "n.txt"), []byte("in the project"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(agentEnv(t.TempDir(), ""), "HOME="+home)
	tests := []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"call", "--workspace", "~/proj", "fs.read", "n.txt"}, "in the project"},
		{[]string{"serve", "--check", "--workspace=~/proj"}, "ok\n"},
		{[]string{"install", "cursor", "--print", "--workspace=~/proj"}, `"` + proj + `"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runBinaryIn(t, t.TempDir(), env, tt.args...)
			if code != 0 || !strings.Contains(stdout, tt.want) {
				t.Errorf("exit %d; want 0 with %q\nstdout: %s\nstderr: %s", code, tt.want, stdout, stderr)
			}
		})
	}
}

// TestBUBHomeTilde: BUB_HOME=~/.bub (from a client's "env" map, which no
// shell expands) is the home directory's .bub, as sessions.DefaultHome
// documents, not a directory named "~" in the current one; BUB_CONFIG
// likewise.
func TestBUBHomeTilde(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "b.toml"), []byte("[profiles.tilde]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var base []string
	for _, kv := range agentEnv(t.TempDir(), "") {
		if !strings.HasPrefix(kv, "BUB_HOME=") {
			base = append(base, kv)
		}
	}
	base = append(base, "HOME="+home, "BUB_HOME=~/.bub")
	t.Run("BUB_HOME", func(t *testing.T) {
		cwd := t.TempDir()
		code, stdout, stderr := runBinaryIn(t, cwd, base, "call", "tape.info")
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		if _, err := os.Stat(filepath.Join(home, ".bub", "tapes")); err != nil {
			t.Errorf("no tapes under $HOME/.bub: %v", err)
		}
		if _, err := os.Stat(filepath.Join(cwd, "~")); err == nil {
			t.Errorf("a directory named ~ was made in the current directory")
		}
	})
	t.Run("--config", func(t *testing.T) {
		code, stdout, stderr := runBinaryIn(t, t.TempDir(), base, "call", "--config=~/b.toml", "--profile", "tilde", "tape.info")
		if code != 0 {
			t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
	})
	t.Run("BUB_CONFIG", func(t *testing.T) {
		code, stdout, stderr := runBinaryIn(t, t.TempDir(), append(base, "BUB_CONFIG=~/b.toml"), "call", "--profile", "tilde", "tape.info")
		if code != 0 {
			t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
	})
}
