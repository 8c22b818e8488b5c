package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValue(t *testing.T) {
	src := "[agent]\nmodel = \"openai:gpt-4o-mini\"\nmax_steps = 7\n[profiles.default]\nconfine = true\n[[auth.tokens]]\nname = \"ci\"\nsha256 = \"" + HashToken("x") + "\"\n"
	c, err := Parse("bub.toml", src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want any
		ok   bool
	}{
		{"agent.model", "openai:gpt-4o-mini", true},
		{"agent.max_steps", int64(7), true},
		{"profiles.default.confine", true, true},
		{"agent", map[string]any{"model": "openai:gpt-4o-mini", "max_steps": int64(7)}, true},
		{"agent.nope", nil, false},
		{"agent.model.deeper", nil, false},
		{"auth.tokens", nil, false},
		{"", nil, false},
	}
	for _, tt := range tests {
		got, ok := c.Value(tt.path)
		if ok != tt.ok || !cmp.Equal(got, tt.want) {
			t.Errorf("Value(%q) = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := Default().Value("agent.model"); ok {
		t.Error("the zero configuration has values")
	}
}
