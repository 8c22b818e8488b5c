package cli_test

import (
	"strings"
	"testing"
)

// TestUnknownFlagSuggestions: a misspelt flag is a usage error that names
// the command's closest flags, as a misspelt command names the closest
// commands; a flag like none gets no suggestion.
func TestUnknownFlagSuggestions(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--htp", "127.0.0.1:0"}, "bub-mcp serve: unknown flag: --htp; did you mean --http?"},
		{[]string{"call", "fs.read", "x", "--jsno"}, "bub-mcp call: unknown flag: --jsno; did you mean --json?"},
		{[]string{"install", "--workspce", ".", "cursor"}, "bub-mcp install: unknown flag: --workspce; did you mean --workspace?"},
		{[]string{"--verison"}, "bub-mcp: unknown flag: --verison; did you mean --version?"},
		{[]string{"serve", "--zzzzzz"}, "bub-mcp serve: unknown flag: --zzzzzz\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runBinary(t, agentEnv(t.TempDir(), ""), "", tt.args...)
			if code != 2 || !strings.HasPrefix(stderr, tt.want) {
				t.Errorf("exit %d; want 2 with %q\nstdout: %s\nstderr: %s", code, tt.want, stdout, stderr)
			}
		})
	}
}
