package cli_test

import (
	"strings"
	"testing"
)

// TestArgumentErrorsAreUsageErrors: a missing or extra argument is a
// usage error on every command (status 2 and the command's usage line),
// cobra's own validators included; an unknown or missing shell for
// completion is one too, not its help with status 0.
func TestArgumentErrorsAreUsageErrors(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		want       string // in stderr ("" for none)
		wantStdout string // in stdout
	}{
		{[]string{"login"}, 2, "usage: bub-mcp login <upstream>", ""},
		{[]string{"upstreams", "approve"}, 2, "usage: bub-mcp upstreams approve <name>", ""},
		{[]string{"upstreams", "logout", "a", "b"}, 2, "usage: bub-mcp upstreams logout <name>", ""},
		{[]string{"completion", "nosh"}, 2, `unknown command "nosh" for bub-mcp completion`, ""},
		{[]string{"completion"}, 2, "name a shell: bash, fish, powershell or zsh", ""},
		{[]string{"completion", "bash"}, 0, "", "bash completion"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runBinary(t, agentEnv(t.TempDir(), ""), "", tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) || !strings.Contains(stdout, tt.wantStdout) {
				t.Errorf("exit %d; want %d with %q on stderr, %q on stdout\nstdout: %.300s\nstderr: %s", code, tt.code, tt.want, tt.wantStdout, stdout, stderr)
			}
		})
	}
}
