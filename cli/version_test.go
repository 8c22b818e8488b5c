package cli_test

import (
	"os"
	"regexp"
	"testing"
)

// TestVersion: the built binary's --version and version print "bub-mcp
// <version>", with the commit and date when known.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		code, stdout, stderr := runBinary(t, os.Environ(), "", arg)
		if code != 0 || !regexp.MustCompile(`^bub-mcp \S+( \(.*\))?\n$`).MatchString(stdout) {
			t.Errorf("bub-mcp %s: exit %d, %q, %q", arg, code, stdout, stderr)
		}
	}
}
