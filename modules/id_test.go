package modules

import (
	"regexp"
	"testing"
)

// validID is the ID pattern as a loop; it must agree with the pattern.
func TestValidID(t *testing.T) {
	re := regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_-]*)*$`)
	for _, id := range []string{"", "a", "builtin", "environment.sandbox", "store.postgres", "provider.my-thing", "a-b", "A", "a.", ".a",
		"a..b", "a.B", "a.1b", "a1_.b_2-", "env.sand box", "é", "a.b.c-d", "9a"} {
		if got, want := validID(id), re.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v; the pattern says %v", id, got, want)
		}
	}
}
