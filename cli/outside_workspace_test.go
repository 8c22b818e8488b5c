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
