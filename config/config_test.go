package config

import (
	"fmt"
	"os"
	"regexp"
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
	if diff := cmp.Diff([]string{"coder", "default", "readonly", "sandboxed"}, c.ProfileNames()); diff != "" {
		t.Errorf("profiles (-want +got):\n%s", diff)
	}
	if c.Server.ShutdownGrace.Duration != 10*time.Second || !c.Profiles["coder"].CodeMode {
		t.Errorf("example decoded wrong: %+v", c)
	}
	// A copy of the example must not lock its user out of /mcp.
	if len(c.Auth.Tokens) != 0 {
		t.Errorf("the example configures %d live tokens; want none", len(c.Auth.Tokens))
	}
	// Its commented-out token blocks still parse once uncommented.
	src, err := os.ReadFile("../bub.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	uncommented := strings.ReplaceAll(strings.ReplaceAll(string(src), "# [[auth.tokens]]", "[[auth.tokens]]"), "<64 hex digits: the SHA-256 of the token>", HashToken("x"))
	for _, k := range []string{"name", "sha256", "env", "profile"} {
		uncommented = strings.ReplaceAll(uncommented, "# "+k+" = ", k+" = ")
	}
	u, err := Parse("bub.toml", uncommented, func(k string) string { return map[string]string{"BUB_TOKEN_DEPLOY": "t"}[k] })
	if err != nil || len(u.Auth.Tokens) != 2 || u.Auth.Tokens[0].Profile != "readonly" {
		t.Errorf("uncommented token blocks: %v, %+v", err, u)
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
	if c.Server.SessionIdleTTL.Duration != 30*time.Minute || c.Server.ShutdownGrace.Duration != 10*time.Second {
		t.Errorf("defaults: %+v", c)
	}
}

// oauthSrc is a bub.toml with [auth.oauth]: issuer, public_url (left out
// when empty) and one rule granting profile.
func oauthSrc(issuer, publicURL, profile string) string {
	src := ""
	if publicURL != "" {
		src += "[server]\npublic_url = \"" + publicURL + "\"\n"
	}
	src += "[auth.oauth]\n"
	if issuer != "" {
		src += "issuer = \"" + issuer + "\"\n"
	}
	return src + "[[auth.oauth.rules]]\nclaim = \"groups\"\nvalue = \"eng\"\nprofile = \"" + profile + "\"\n"
}

func TestOAuthConfig(t *testing.T) {
	src := oauthSrc("https://idp.example.com/realms/x", "https://mcp.example.com", "default") +
		"[auth.oauth.introspection]\nclient_id = \"bub\"\nclient_secret_env = \"SECRET\"\n"
	c, err := Parse("bub.toml", src, func(k string) string { return map[string]string{"SECRET": "s3"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := &OAuth{Issuer: "https://idp.example.com/realms/x", Rules: []OAuthRule{{Claim: "groups", Value: "eng", Profile: "default"}},
		Introspection: &Introspection{ClientID: "bub", ClientSecretEnv: "SECRET", ClientSecret: "s3"}}
	if diff := cmp.Diff(want, c.Auth.OAuth); diff != "" {
		t.Errorf("[auth.oauth] (-want +got):\n%s", diff)
	}
	if c.Server.PublicURL != "https://mcp.example.com" {
		t.Errorf("public_url = %q", c.Server.PublicURL)
	}
	// A local try: http on loopback is fine for both.
	if _, err := Parse("bub.toml", oauthSrc("http://127.0.0.1:4444/", "http://127.0.0.1:8080", "default"), func(string) string { return "" }); err != nil {
		t.Errorf("loopback http: %v", err)
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
		{"oauth without issuer", oauthSrc("", "https://mcp.example.com", "default"), "config: bub.toml:3: auth.oauth: needs issuer"},
		{"oauth issuer not a URL", oauthSrc("idp.example.com", "https://mcp.example.com", "default"), "config: bub.toml:4: auth.oauth.issuer: want an absolute http(s) URL"},
		{"oauth issuer plain http", oauthSrc("http://idp.example.com", "https://mcp.example.com", "default"), "config: bub.toml:4: auth.oauth.issuer: http is accepted on a loopback host only"},
		{"oauth without public_url", oauthSrc("https://idp.example.com", "", "default"), "config: bub.toml:1: auth.oauth: needs [server] public_url"},
		{"oauth public_url plain http", oauthSrc("https://idp.example.com", "http://mcp.example.com", "default"), "config: bub.toml:2: server.public_url: http is accepted on a loopback host only"},
		{"oauth rule unknown profile", oauthSrc("https://idp.example.com", "https://mcp.example.com", "nope"), "config: bub.toml:8: auth.oauth.rules.profile: unknown profile \"nope\""},
		{"oauth without rules", "[server]\npublic_url = \"https://mcp.example.com\"\n[auth.oauth]\nissuer = \"https://idp.example.com\"\n", "config: bub.toml:3: auth.oauth: needs at least one"},
		{"oauth secret env unset", oauthSrc("https://idp.example.com", "https://mcp.example.com", "default") + "[auth.oauth.introspection]\nclient_id = \"bub\"\nclient_secret_env = \"NOPE\"\n", "config: bub.toml:11: auth.oauth.introspection.client_secret_env: environment variable NOPE is empty or unset"},
		{"wrong type", "[server]\nallowed_hosts = \"many\"\n", "config: bub.toml:2: server.allowed_hosts"},
		{"wildcard origin", "[server]\ncors_origins = [\"*\"]\n", "config: bub.toml:2: server.cors_origins: \"*\" is not allowed"},
		{"origin with a path", "[server]\ncors_origins = [\"http://localhost:6274\", \"http://localhost:6274/\"]\n", "config: bub.toml:2: server.cors_origins: \"http://localhost:6274/\" is not an origin"},
		{"origin without a scheme", "[server]\ncors_origins = [\"localhost:6274\"]\n", "config: bub.toml:2: server.cors_origins: \"localhost:6274\" is not an origin"},
		{"origin in upper case", "[server]\ncors_origins = [\"http://Inspector.example\"]\n", "config: bub.toml:2: server.cors_origins: \"http://Inspector.example\": write the origin in lower case"},
		{"negative max_sessions", "[server]\nmax_sessions = -1\n", "config: bub.toml:2: server.max_sessions: must be >= 0"},
		{"negative share", "[server]\n\nmax_sessions_per_principal = -4\n", "config: bub.toml:3: server.max_sessions_per_principal: must be >= 0"},
		{"unknown profile key", "[profiles.x]\ntolls = []\n", "config: bub.toml:2: profiles.x.tolls: unknown key"},
		{"bad glob", "[profiles.x]\ntools = [\"[\"]\n", "config: bub.toml:2: profiles.x.tools: providers: bad tool pattern"},
		{"bad confirm glob", "[profiles.x]\nconfirm = [\"[\"]\n", "config: bub.toml:2: profiles.x.confirm: providers: bad tool pattern"},
		{"bad profile name", "[profiles.\"a b\"]\n", "config: bub.toml:1: profiles.a b: profile names must match"},
		{"token with unknown profile", "[[auth.tokens]]\nsha256 = \"" + strings.Repeat("a", 64) + "\"\nprofile = \"nope\"\n", "config: bub.toml:3: auth.tokens.profile: unknown profile \"nope\""},
		{"token in clear", "[[auth.tokens]]\nsha256 = \"hunter2\"\n", "config: bub.toml:2: auth.tokens.sha256: must be the token's SHA-256"},
		{"token env unset", "[[auth.tokens]]\nenv = \"MISSING\"\n", "config: bub.toml:2: auth.tokens.env: environment variable MISSING is empty or unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("bub.toml", tt.src, getenv)
			if err == nil {
				err = c.Check() // what no module decodes is unknown
			}
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

// TestModuleTables checks the contract modules rely on: several decoders
// may share a table, a key none of them knows is refused with its line,
// and a table nobody claims is refused too.
func TestModuleTables(t *testing.T) {
	src := "[tools]\nmax_concurrency = 2\nspill_threshold = 10\n\n[web]\nmax_bytes = 5\n"
	tests := []struct {
		name    string
		decode  func(c *Config) error
		wantErr string
	}{
		{"all claimed", func(c *Config) error {
			var a struct {
				MaxConcurrency int `toml:"max_concurrency"`
			}
			var b struct {
				SpillThreshold *int `toml:"spill_threshold"`
			}
			var w struct {
				MaxBytes int64 `toml:"max_bytes"`
			}
			if err := c.Decode("tools", &a); err != nil {
				return err
			}
			if err := c.Decode("tools", &b); err != nil {
				return err
			}
			if a.MaxConcurrency != 2 || b.SpillThreshold == nil || *b.SpillThreshold != 10 {
				return fmt.Errorf("decoded %+v %+v", a, b)
			}
			return c.Decode("web", &w)
		}, ""},
		{"key left over", func(c *Config) error {
			var a struct {
				MaxConcurrency int `toml:"max_concurrency"`
			}
			c.Decode("web", &struct {
				MaxBytes int64 `toml:"max_bytes"`
			}{})
			return c.Decode("tools", &a)
		}, "config: bub.toml:3: tools.spill_threshold: unknown key (see bub.toml.example)"},
		{"table left over", func(c *Config) error { return nil }, "config: bub.toml:1: tools: unknown table (see bub.toml.example)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("bub.toml", src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.decode(c); err != nil {
				t.Fatal(err)
			}
			err = c.Check()
			if got := fmt.Sprint(err); (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && got != tt.wantErr) {
				t.Errorf("Check() = %v; want %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"0", 0, false}, {"4096", 4096, false}, {"512KiB", 512 << 10, false}, {"256MiB", 256 << 20, false},
		{"256M", 256 << 20, false}, {"1 GiB", 1 << 30, false}, {"2gb", 2 << 30, false}, {"1TiB", 1 << 40, false},
		{"", 0, true}, {"MiB", 0, true}, {"12 parsecs", 0, true}, {"-1", 0, true}, {"99999999999TiB", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// FuzzParse holds Parse to its contract on any source: it never panics,
// and an error names the file, as every configuration error does.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "[server]\nmax_message_bytes = 1024\n", "[profiles.default]\ntools = [\"fs.*\"]\n",
		"[profiles.a]\nsessions = [\"\"]\n", "[[auth.tokens]]\nprofile = \"x\"\n",
		"[[auth.tokens]]\nenv = \"T\"\nsha256 = \"ab\"\n", "[server]\nmax_message_bytes = \"16 MiB\"\n",
		"[server\n", "a.b.c = 1\n[a]\nb = 2\n", "[profiles.\"x.y\"]\n", "[profiles.default]\nworkspace = \"~/w\"\n",
		"[profiles.p.environment]\nkind = \"sandbox\"\nmemory = 1\n", "[profiles.p]\nenvironment = \"sandbox\"\n[profiles.p.sandbox]\nnetwork = \"host\"\n",
		"[profiles.p]\nenvironment = [1]\n", "[store]\nkind = \"postgres\"\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		_, err := Parse("fuzz.toml", src, func(string) string { return "" })
		if err != nil && !strings.HasPrefix(err.Error(), "config: fuzz.toml") {
			t.Fatalf("Parse(%.200q) = %v; want an error naming fuzz.toml", src, err)
		}
	})
}

// TestCORSOriginsAccepted: origins as browsers send them are kept as
// written.
func TestCORSOriginsAccepted(t *testing.T) {
	src := "[server]\ncors_origins = [\"http://localhost:6274\", \"https://inspector.example.com\", \"http://[::1]:6274\"]\n"
	c, err := Parse("bub.toml", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://localhost:6274", "https://inspector.example.com", "http://[::1]:6274"}
	if diff := cmp.Diff(want, c.Server.CORSOrigins); diff != "" {
		t.Errorf("cors_origins (-want +got):\n%s", diff)
	}
}

// The token-hash check is a loop; it must agree with the pattern it
// replaces. (Profile names are ident.Word's, tested there.)
func TestValidSHA256(t *testing.T) {
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, s := range []string{"", "default", strings.Repeat("a", 64), strings.Repeat("A", 64), strings.Repeat("0", 63),
		strings.Repeat("0", 65), strings.Repeat("g", 64), strings.Repeat("f", 64) + "\n"} {
		if got, want := validSHA256(s), hex.MatchString(s); got != want {
			t.Errorf("validSHA256(%q) = %v; the pattern says %v", s, got, want)
		}
	}
}
