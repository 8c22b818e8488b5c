package cli_test

import (
	"strings"
	"testing"
)

// TestUnknownLogLevelIsSaid: a BUB_LOG_LEVEL that is no level (verbose,
// trace) is warned about, as a bad BUB_LOG_FORMAT is, instead of being
// ignored; a known one, in any case, is not.
func TestUnknownLogLevelIsSaid(t *testing.T) {
	tests := []struct {
		level string
		warn  bool
	}{
		{"verbose", true},
		{"trace", true},
		{"INFO", false},
		{"warn", false},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, agentEnv(t.TempDir(), "", "BUB_LOG_LEVEL="+tt.level), "", "serve", "--check")
			said := strings.Contains(stderr, "BUB_LOG_LEVEL is none of debug, info, warn, error; logging at info") && strings.Contains(stderr, "value="+tt.level)
			if code != 0 || said != tt.warn {
				t.Errorf("exit %d, warned %v; want 0, warned %v\nstdout: %s\nstderr: %s", code, said, tt.warn, stdout, stderr)
			}
		})
	}
}
