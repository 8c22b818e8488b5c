package cli_test

import (
	"strings"
	"testing"
)

// TestListenAddrWithoutPort: a port alone ("8080", a common first try) or
// a host alone is no address to listen on; serve and console say so with
// status 2 instead of taking it for a non-loopback host and asking for
// auth tokens.
func TestListenAddrWithoutPort(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--http", "8080"}, `--http "8080": want HOST:PORT`},
		{[]string{"serve", "--http", "localhost", "--check"}, `--http "localhost": want HOST:PORT`},
		{[]string{"console", "--http", "7777"}, `--http "7777": want HOST:PORT`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runBinary(t, agentEnv(t.TempDir(), ""), "", tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "without auth") {
				t.Errorf("exit %d; want 2 with %q\nstdout: %s\nstderr: %s", code, tt.want, stdout, stderr)
			}
		})
	}
}
