package skills

import (
	"strings"
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
flow: {k: [1, 2]}
anchor: &a shared
alias: *a
`
	got, _ := parseFrontmatter(fm)
	want := map[string]any{
		"name":        "my-skill",
		"description": "Line one.\nLine two.\n",
		"quoted":      "it's",
		"dq":          "tab\there",
		"plain":       "first continued",
		"empty":       nil,
		"metadata":    map[string]any{"a": "1", "b": "two"},
		"list":        []any{"x"},
		"flow":        map[string]any{"k": []any{1, 2}},
		"anchor":      "shared",
		"alias":       "shared",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseFrontmatter (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"- a list\n- at the top\n", "just a scalar", "key: [unclosed\n", strings.Repeat("k: v\n", maxFrontmatter/4)} {
		if got, _ := parseFrontmatter(bad); len(got) != 0 {
			t.Errorf("parseFrontmatter(%.40q) = %v; want an empty mapping", bad, got)
		}
	}
}

func TestStringMap(t *testing.T) {
	tests := []struct {
		in   any
		want map[string]string
		ok   bool
	}{
		{map[string]any{"a": "1"}, map[string]string{"a": "1"}, true},
		{map[string]any{"a": 1}, nil, false},
		{map[string]any{"a": map[string]any{}}, nil, false},
		{"x", nil, false},
	}
	for _, tt := range tests {
		got, ok := stringMap(tt.in)
		if ok != tt.ok || !cmp.Equal(got, tt.want) {
			t.Errorf("stringMap(%v) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseFrontmatter checks that no frontmatter makes the parser panic.
func FuzzParseFrontmatter(f *testing.F) {
	f.Add("name: a\ndescription: >\n  x\n  y\nmetadata:\n  k: v\n")
	f.Add("x: 'unterminated\n  - y\n:\n\t|")
	f.Add("a: &a [*a, *a]\n")
	f.Fuzz(func(t *testing.T, fm string) {
		parseFrontmatter(fm)
		splitFrontmatter(fm)
	})
}
