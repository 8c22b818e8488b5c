package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExampleParses(t *testing.T) {
	c, err := Load("../bub.toml.example", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"coder", "default", "readonly"}, c.ProfileNames()); diff != "" {
		t.Errorf("profiles (-want +got):\n%s", diff)
	}
	if c.Server.ShutdownGrace.Duration != 10*time.Second || c.Auth.Tokens[0].Profile != "readonly" || !c.Profiles["coder"].CodeMode {
		t.Errorf("example decoded wrong: %+v", c)
	}
}

func TestDefaults(t *testing.T) {
	c := Default()
	if _, ok := c.Profiles[DefaultProfile]; !ok {
		t.Fatal("no default profile")
	}
	if got := c.Profiles[DefaultProfile].SessionKey(); got != "mcp:default" {
		t.Errorf("SessionKey() = %q", got)
	}
	if c.CodeMode.Python != "python3" || c.Agent.MaxSteps != 50 || c.Server.SessionIdleTTL.Duration != 30*time.Minute {
		t.Errorf("defaults: %+v", c)
	}
}

func TestErrorsNameFileLineAndKey(t *testing.T) {
	env := map[string]string{"TOK": "abc"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name, src, want string
	}{
		{"syntax", "[server\nx = 1", "config: bub.toml:2: (syntax): expected"},
		{"unknown key", "[server]\nsession_idle_ttl = \"1m\"\nbogus = 1\n", "config: bub.toml:3: server.bogus: unknown key"},
		{"bad duration", "[server]\n\nshutdown_grace = \"soon\"\n", "config: bub.toml:3: server.shutdown_grace"},
		{"wrong type", "[tools]\nmax_concurrency = \"many\"\n", "config: bub.toml:2: tools.max_concurrency"},
		{"negative", "[tools]\nmax_concurrency = -1\n", "config: bub.toml:2: tools.max_concurrency: must be >= 0"},
		{"bad glob", "[profiles.x]\ntools = [\"[\"]\n", "config: bub.toml:2: profiles.x.tools: providers: bad tool pattern"},
		{"bad profile name", "[profiles.\"a b\"]\n", "config: bub.toml:1: profiles.a b: profile names must match"},
		{"token with unknown profile", "[[auth.tokens]]\nsha256 = \"" + strings.Repeat("a", 64) + "\"\nprofile = \"nope\"\n", "config: bub.toml:3: auth.tokens.profile: unknown profile \"nope\""},
		{"token in clear", "[[auth.tokens]]\nsha256 = \"hunter2\"\n", "config: bub.toml:2: auth.tokens.sha256: must be the token's SHA-256"},
		{"token env unset", "[[auth.tokens]]\nenv = \"MISSING\"\n", "config: bub.toml:2: auth.tokens.env: environment variable MISSING is empty or unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bub.toml", tt.src, getenv)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Parse() error = %v; want prefix %q", err, tt.want)
			}
		})
	}
}

func TestTokensFromEnvAndWorkspace(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/bub.toml"
	src := "[profiles.p]\nworkspace = \"ws\"\n[[auth.tokens]]\nname = \"deploy\"\nenv = \"TOK\"\nprofile = \"p\"\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, func(k string) string { return map[string]string{"TOK": "test"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Auth.Tokens[0].SHA256, HashToken("test"); got != want {
		t.Errorf("token hash = %s; want %s", got, want)
	}
	if got := c.Profiles["p"].Workspace; got != dir+"/ws" {
		t.Errorf("workspace = %q; want relative to the file", got)
	}
}
