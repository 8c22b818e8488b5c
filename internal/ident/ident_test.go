package ident_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/ident"
)

// Word is the pattern as a loop; it must agree with the pattern.
func TestWord(t *testing.T) {
	re := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for _, s := range []string{"", "a", "fs_read", "A-Z_09", "fs.read", "tab\t", "é", "a b", "日本", "default", "read-only_2", "p.x",
		strings.Repeat("x", 64), strings.Repeat("x", 65), "x\n", "-", "_"} {
		if got, want := ident.Word(s), re.MatchString(s); got != want {
			t.Errorf("Word(%q) = %v; the pattern says %v", s, got, want)
		}
	}
}
