package cli

import (
	"strings"
	"testing"
)

// TestStampedVersion: what `make build` stamps with -ldflags -X wins over
// the build information.
func TestStampedVersion(t *testing.T) {
	defer func(v, c, d string) { Version, Commit, Date = v, c, d }(Version, Commit, Date)
	Version, Commit, Date = "v9.8.7", "0123456789abcdef0123", "2026-12-01T00:00:00Z"
	code, out, _ := runCLI(t, t.TempDir(), "--version")
	if want := "bub-mcp v9.8.7 (commit 0123456789ab, built 2026-12-01T00:00:00Z)\n"; code != 0 || out != want {
		t.Errorf("--version = %d, %q; want %q", code, out, want)
	}
}

// TestLogFormat: BUB_LOG_FORMAT=json makes the logs JSON lines.
func TestLogFormat(t *testing.T) {
	_, _, stderr := runCLIEnv(t, map[string]string{"BUB_HOME": t.TempDir(), "BUB_LOG_FORMAT": "json", "BUB_LOG_LEVEL": "debug"}, "call", "tape.info")
	if !strings.HasPrefix(stderr, `{"time":`) {
		t.Errorf("stderr = %q; want JSON lines", stderr)
	}
}
