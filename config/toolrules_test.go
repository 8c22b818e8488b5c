package config_test

import (
	"testing"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// Rules mix globs and hints; "destructive" holds only for a tool that is
// not read-only, as MCP defines the hint.
func TestMatchToolRules(t *testing.T) {
	tools := []*registry.Tool{
		{Name: "fs.read", Annotations: registry.Annotations{ReadOnly: true, Idempotent: true}},
		{Name: "fs.write", Annotations: registry.Annotations{Destructive: true, Idempotent: true}},
		{Name: "up.odd", Annotations: registry.Annotations{ReadOnly: true, Destructive: true, OpenWorld: true}},
		{Name: "tape.handoff"},
	}
	for _, tc := range []struct {
		rules []string
		want  []string
	}{
		{[]string{"hint:read_only"}, []string{"fs.read", "up.odd"}},
		{[]string{"hint:destructive"}, []string{"fs.write"}},
		{[]string{"hint:not_read_only"}, []string{"fs.write", "tape.handoff"}},
		{[]string{"hint:not_destructive"}, []string{"fs.read", "up.odd", "tape.handoff"}},
		{[]string{"hint:idempotent"}, []string{"fs.read", "fs.write"}},
		{[]string{"hint:open_world"}, []string{"up.odd"}},
		{[]string{"tape.*", "hint:destructive"}, []string{"fs.write", "tape.handoff"}},
		{[]string{"hint:*"}, nil}, // a hint is a word, never a glob
	} {
		var got []string
		for _, tool := range tools {
			if config.MatchToolRules(tc.rules, tool) {
				got = append(got, tool.Name)
			}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%v (-want +got):\n%s", tc.rules, d)
		}
	}
}

func TestCheckToolRules(t *testing.T) {
	for _, tc := range []struct {
		rules []string
		ok    bool
	}{
		{[]string{"hint:read_only", "hint:not_open_world", "bash*"}, true},
		{[]string{"hint:readonly"}, false},
		{[]string{"hint:not_"}, false},
		{[]string{"hint:*"}, false},
		{[]string{"[bad"}, false},
	} {
		if err := config.CheckToolRules(tc.rules); (err == nil) != tc.ok {
			t.Errorf("%v: error %v; want ok %v", tc.rules, err, tc.ok)
		}
	}
}
