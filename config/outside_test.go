package config

import (
	"strings"
	"testing"
)

// TestTopLevelKeyIsNoTable: a key written above every table is refused as
// an unknown key saying where keys go, not as an "unknown table"; an
// unknown table or array of tables is still a table.
func TestTopLevelKeyIsNoTable(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"bare key", "metrics = true\n", "config: bub.toml:1: metrics: unknown key (keys go in a table, such as [server]; see bub.toml.example)"},
		{"bare key after comment", "# bub\nshutdown_grace = \"5s\"\n[server]\n", "config: bub.toml:2: shutdown_grace: unknown key (keys go in a table"},
		{"table", "[sever]\nmetrics = true\n", "config: bub.toml:1: sever: unknown table (see bub.toml.example)"},
		{"array of tables", "[[limit]]\nper_minute = 1\n", "config: bub.toml:1: limit: unknown table (see bub.toml.example)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("bub.toml", tt.src, func(string) string { return "" })
			if err == nil {
				err = c.Check()
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %v; want prefix %q", err, tt.want)
			}
		})
	}
}

// TestFailPlacesMissingKeyAtItsTable: an error about a key the file does
// not set (a required key missing, or misspelt) names the line of the
// table that lacks it, not line 0.
func TestFailPlacesMissingKeyAtItsTable(t *testing.T) {
	src := "[server]\nmetrics = true\n\n[upstreams.x]\ncommand = \"a\"\n\n[upstreams.y]\ncomand = \"b\"\n\n[[limits]]\nper_minute = 1\n"
	c, err := Parse("bub.toml", src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key  []string
		want string
	}{
		{[]string{"upstreams", "y", "command"}, "config: bub.toml:7: upstreams.y.command: required"},
		{[]string{"upstreams", "x", "command"}, "config: bub.toml:5: upstreams.x.command: required"},
		{[]string{"server", "public_url"}, "config: bub.toml:1: server.public_url: required"},
		{[]string{"store", "kind"}, "config: bub.toml:0: store.kind: required"},
	}
	for _, tt := range tests {
		if got := c.Fail("required", tt.key...).Error(); got != tt.want {
			t.Errorf("Fail(%q) = %q; want %q", tt.key, got, tt.want)
		}
	}
}

// TestTypeErrorsInTOMLWords: a value of the wrong type is refused saying
// what to write, in TOML's words, not Go's ("destination has type
// slice").
func TestTypeErrorsInTOMLWords(t *testing.T) {
	tests := []struct {
		src, want string
	}{
		{"[server]\nmetrics = \"yes\"\n", "config: bub.toml:2: server.metrics: want true or false, not a string"},
		{"[server]\nmax_sessions = \"many\"\n", "config: bub.toml:2: server.max_sessions: want a whole number, not a string"},
		{"[server]\nallowed_hosts = \"example.com\"\n", `config: bub.toml:2: server.allowed_hosts: want a list such as ["a", "b"], not a string`},
		{"[profiles.x]\ntools = 5\n", `config: bub.toml:2: profiles.x.tools: want a list such as ["a", "b"], not a whole number`},
		{"[profiles.x]\nworkspace = [\"a\"]\n", "config: bub.toml:2: profiles.x.workspace: want a string in quotes, not a list"},
		{"[server]\nstate_key = 1979-05-27\n", "config: bub.toml:2: server.state_key: want a string in quotes, not a date or time"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := Parse("bub.toml", tt.src, func(string) string { return "" })
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse() error = %v; want %q", err, tt.want)
			}
		})
	}
}
