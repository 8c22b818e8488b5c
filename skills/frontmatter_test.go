package skills

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFrontmatter(t *testing.T) {
	fm := `name: my-skill   # trailing comment
Description: |
  Line one.
  Line two.

quoted: 'it''s'
dq: "tab\there"
plain: first
  continued
empty:
metadata:
  a: "1"
  b: two
list:
  - x
`
	got := parseFrontmatter(fm)
	want := map[string]any{
		"name":        "my-skill",
		"description": "Line one.\nLine two.\n",
		"quoted":      "it's",
		"dq":          "tab\there",
		"plain":       "first continued",
		"empty":       nil,
		"metadata":    map[string]string{"a": "1", "b": "two"},
		"list":        []string{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseFrontmatter (-want +got):\n%s", diff)
	}
}

// FuzzParseFrontmatter checks that no frontmatter makes the parser panic.
func FuzzParseFrontmatter(f *testing.F) {
	f.Add("name: a\ndescription: >\n  x\n  y\nmetadata:\n  k: v\n")
	f.Add("x: 'unterminated\n  - y\n:\n\t|")
	f.Fuzz(func(t *testing.T, fm string) {
		parseFrontmatter(fm)
		splitFrontmatter(fm)
	})
}
