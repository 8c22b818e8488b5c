package config

import (
	"strings"
	"testing"
)

func TestWildcard(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"mcp:*", "mcp:default", true},
		{"mcp:*", "mcp:default/sub/deeper", true},
		{"mcp:*", "cli:x", false},
		{"*", "", true},
		{"", "", true},
		{"", "x", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*/sub", "mcp:x/sub", true},
		{"*/sub", "mcp:x/sub/no", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"team:ü*", "team:über", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
	}
	for _, tt := range tests {
		if got := wildcard(tt.pattern, tt.s); got != tt.want {
			t.Errorf("wildcard(%q, %q) = %v; want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestSessionAllowed(t *testing.T) {
	tests := []struct {
		name    string
		profile Profile
		id      string
		want    bool
	}{
		{"own", Profile{Name: "p"}, "mcp:p", true},
		{"derived", Profile{Name: "p"}, "mcp:p/sub", true},
		{"sibling", Profile{Name: "p"}, "mcp:q", false},
		{"prefix is not derived", Profile{Name: "p"}, "mcp:pq", false},
		{"named session's own", Profile{Name: "p", Session: "team"}, "team", true},
		{"named session's derived", Profile{Name: "p", Session: "team"}, "team/x", true},
		{"named session: not the default key", Profile{Name: "p", Session: "team"}, "mcp:p", false},
		{"globs", Profile{Name: "p", Sessions: []string{"mcp:*"}}, "mcp:other", true},
		{"globs exclude", Profile{Name: "p", Sessions: []string{"mcp:*"}}, "telegram:1", false},
		{"own always", Profile{Name: "p", Sessions: []string{"x"}}, "mcp:p", true},
		{"temp not by default", Profile{Name: "p"}, "temp/abcd", false},
	}
	for _, tt := range tests {
		if got := tt.profile.SessionAllowed(tt.id); got != tt.want {
			t.Errorf("%s: SessionAllowed(%q) = %v; want %v", tt.name, tt.id, got, tt.want)
		}
	}
}

func TestEmptySessionPatternRefused(t *testing.T) {
	_, err := Parse("bub.toml", "[profiles.p]\nsessions = [\"mcp:*\", \" \"]\n", func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "profiles.p.sessions") || !strings.Contains(err.Error(), "empty session pattern") {
		t.Errorf("Parse = %v; want an error naming profiles.p.sessions", err)
	}
}
