package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBUBConfigUnreadable: a $BUB_CONFIG naming a file that is not there
// (set long ago in a shell profile) fails saying the path came from
// $BUB_CONFIG; a --config typed on the command line needs no such note.
func TestBUBConfigUnreadable(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone.toml")
	tests := []struct {
		name  string
		extra []string
		args  []string
		note  bool
	}{
		{"BUB_CONFIG missing", []string{"BUB_CONFIG=" + missing}, []string{"config", "check"}, true},
		{"BUB_CONFIG a directory", []string{"BUB_CONFIG=" + t.TempDir()}, []string{"tools"}, true},
		{"--config missing", nil, []string{"config", "check", "--config", missing}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, agentEnv(t.TempDir(), "", tt.extra...), "", tt.args...)
			if code != 1 || strings.Contains(stderr, "$BUB_CONFIG") != tt.note {
				t.Errorf("exit %d; want 1, naming $BUB_CONFIG: %v\nstdout: %s\nstderr: %s", code, tt.note, stdout, stderr)
			}
		})
	}
}
