// Package config loads bub.toml. Every key is documented in
// bub.toml.example at the repository root. A bad file is refused whole with
// one error naming the file, the line and the key: the server never starts
// half-configured.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/bubbuild/bub-mcp/internal/hostcheck"
	"github.com/bubbuild/bub-mcp/internal/ident"
	"github.com/bubbuild/bub-mcp/providers"
)

// DefaultProfile is the profile used when none is named.
const DefaultProfile = "default"

// Config is a loaded configuration. The tables the application itself
// reads ([server], [profiles], [auth]) are decoded and checked by Parse;
// every other table belongs to a module, which decodes it with Decode.
// Check then reports what no one decoded, so a typo is still refused with
// the file, line and key.
type Config struct {
	// Path is the file it came from; empty for the zero configuration.
	Path   string
	Server Server
	// Profiles by name; always has DefaultProfile.
	Profiles map[string]*Profile
	Auth     Auth

	src     string
	md      toml.MetaData
	tables  map[string]toml.Primitive // top-level tables left to modules
	mu      sync.Mutex
	claimed map[string]bool
}

// Server holds transport settings.
type Server struct {
	// SessionIdleTTL expires idle 2025-protocol HTTP sessions.
	SessionIdleTTL Duration `toml:"session_idle_ttl"`
	// ShutdownGrace is how long in-flight calls may finish on shutdown
	// before they are cancelled.
	ShutdownGrace Duration `toml:"shutdown_grace"`
	// PublicURL is the URL clients reach this server at (behind a TLS
	// proxy: the proxy's), e.g. https://mcp.example.com; OAuth's resource
	// identifier and metadata URLs are built from it.
	PublicURL string `toml:"public_url"`
	// AllowedHosts extends the Host/Origin allow-list of loopback binds.
	AllowedHosts []string `toml:"allowed_hosts"`
	// CORSOrigins are the exact origins whose web pages may call the HTTP
	// transport from a browser (the MCP Inspector's UI); "*" is refused.
	CORSOrigins []string `toml:"cors_origins"`
	// AuditCommitInterval is the tape group-commit interval for the audit
	// trail: what a crash can lose at most.
	AuditCommitInterval Duration `toml:"audit_commit_interval"`
	// MaxMessageBytes bounds one message (HTTP body, stdio line); 0 means
	// mcpserver.DefaultMaxMessageBytes.
	MaxMessageBytes int64 `toml:"max_message_bytes"`
	// MaxConcurrentRequests bounds HTTP requests in flight over all
	// clients; 0 means mcpserver's default.
	MaxConcurrentRequests int `toml:"max_concurrent_requests"`
	// MaxConcurrentPerClient bounds one client's requests in flight; 0
	// means mcpserver's default.
	MaxConcurrentPerClient int `toml:"max_concurrent_per_client"`
	// ReadTimeout bounds reading one HTTP request body; 0 means
	// mcpserver's default.
	ReadTimeout Duration `toml:"read_timeout"`
	// IdleTimeout closes idle HTTP keep-alive connections; 0 means
	// mcpserver's default.
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxSessions bounds the 2025-protocol HTTP sessions open at once; 0
	// means mcpserver's default.
	MaxSessions int `toml:"max_sessions"`
	// MaxSessionsPerPrincipal bounds one bearer token's (or, without
	// tokens, one client address's) sessions; 0 means a quarter of
	// MaxSessions.
	MaxSessionsPerPrincipal int `toml:"max_sessions_per_principal"`
	// StateKey seals the requestState of 2026-07-28 multi-round-trip
	// calls (BUB_STATE_KEY overrides it); empty means a key generated once
	// under $BUB_HOME. Replicas behind one load balancer must share it.
	StateKey string `toml:"state_key"`
	// Metrics serves GET /metrics (Prometheus text format) on the HTTP
	// transport.
	Metrics bool `toml:"metrics"`
}

// Profile is a named tool scope with its environment.
type Profile struct {
	Name string `toml:"-"`
	// Tools are allow globs over runtime names; empty means all.
	Tools []string `toml:"tools"`
	// Deny globs win over Tools.
	Deny []string `toml:"deny"`
	// Workspace is the directory tools work in; relative paths resolve
	// against the config file's directory; empty means the current one.
	Workspace string `toml:"workspace"`
	// Confine refuses paths outside the workspace.
	Confine bool `toml:"confine"`
	// Session is the Bub session whose tape and settings the profile uses;
	// empty means "mcp:<profile>".
	Session string `toml:"session"`
	// CodeMode is the default of the session's code_mode switch.
	CodeMode bool `toml:"code_mode"`
	// CodeModeTools, when set, are the tools admitted into code mode
	// (callable only inside run_code), as globs and annotation hints like
	// Confirm ("hint:read_only"); the others stay direct tools. Empty
	// means every tool that can be used from code.
	CodeModeTools []string `toml:"code_mode_tools"`
	// Agent offers agent_run to MCP clients when a model is configured.
	Agent bool `toml:"agent"`
	// Environment is [profiles.<name>.environment]: its kind names the
	// environment module (environment.<kind>) the profile's tools run in,
	// "" meaning environment.DefaultName ("local"), and its other keys
	// are that module's own. Parse fills it in; never nil after Parse.
	Environment *ModuleRef `toml:"-"`
	// Providers name registered providers (package providers) that
	// prepare the profile's tools; they run in registration order.
	Providers []string `toml:"providers"`
	// Sessions are the session ids the profile's clients may name (to
	// agent_run and subagent), as patterns where '*' matches any run of
	// characters ('/' included) and '?' one character; empty means the
	// profile's own session and those derived from it ("<own>/...").
	Sessions []string `toml:"sessions"`
	// Confirm are globs over runtime names (as Tools) and annotation
	// hints ("hint:destructive", see Hints): a matching call, direct or
	// nested in run_code, runs only once the user approves it (the
	// confirm module).
	Confirm []string `toml:"confirm"`
	// ConfirmTimeout bounds the wait for the user's answer; 0 means the
	// confirm module's default.
	ConfirmTimeout Duration `toml:"confirm_timeout"`
	// ConfirmVia are the ways a confirmation is asked, in order of
	// preference: "elicitation" (the client asks its user) and "console"
	// (the call waits in the approvals queue for the operator console).
	// The first way that can reach someone is used; empty means
	// ["elicitation"].
	ConfirmVia []string `toml:"confirm_via"`
}

// SessionAllowed reports whether the profile's clients may use the session
// id: its own session always, else as Sessions says.
func (p *Profile) SessionAllowed(id string) bool {
	own := p.SessionKey()
	if id == own {
		return true
	}
	if len(p.Sessions) == 0 {
		return strings.HasPrefix(id, own+"/")
	}
	for _, pat := range p.Sessions {
		if wildcard(pat, id) {
			return true
		}
	}
	return false
}

// SessionScope describes what SessionAllowed accepts, for error messages.
func (p *Profile) SessionScope() string {
	if len(p.Sessions) == 0 {
		return fmt.Sprintf("%q and %q (the default)", p.SessionKey(), p.SessionKey()+"/*")
	}
	return fmt.Sprintf("%q", p.Sessions)
}

// wildcard matches s against a pattern in which '*' stands for any run of
// characters and '?' for one; everything else matches itself. It backtracks
// only to the last '*', so it is linear in practice.
func wildcard(pattern, s string) bool {
	p, n := []rune(pattern), []rune(s)
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// Scope is the profile's tool scope.
func (p *Profile) Scope() providers.Scope { return providers.Scope{Allow: p.Tools, Deny: p.Deny} }

// SessionKey is the Bub session id the profile uses.
func (p *Profile) SessionKey() string {
	if p.Session != "" {
		return p.Session
	}
	return "mcp:" + p.Name
}

// Auth holds bearer tokens.
type Auth struct {
	Tokens []Token `toml:"tokens"`
	// OAuth makes the HTTP transport an OAuth 2.1 resource server beside
	// the static tokens; nil means static tokens only.
	OAuth *OAuth `toml:"oauth"`
}

// OAuth is [auth.oauth]: the authorization server whose access tokens
// bub-mcp accepts, and how their claims choose a profile.
type OAuth struct {
	// Issuer is the authorization server's issuer identifier, exactly as
	// its metadata and its tokens' iss say it.
	Issuer string `toml:"issuer"`
	// RequiredScopes must all be granted; advertised in the metadata and
	// in 401 challenges.
	RequiredScopes []string `toml:"required_scopes"`
	// Audience lists extra accepted aud values; empty means only this
	// server's own resource URLs (RFC 8707).
	Audience []string `toml:"audience"`
	// NameClaim is the claim a principal's name comes from; "" means
	// preferred_username, then email, then name.
	NameClaim string `toml:"name_claim"`
	// JWKSURL overrides the issuer's jwks_uri.
	JWKSURL string `toml:"jwks_url"`
	// ClockSkew is the leeway for exp/nbf (default 60s, at most 5m).
	ClockSkew Duration `toml:"clock_skew"`
	// Introspection accepts opaque tokens through RFC 7662.
	Introspection *Introspection `toml:"introspection"`
	// Rules map claims to profiles, first match first; a token matching
	// none is refused (403).
	Rules []OAuthRule `toml:"rules"`
	// Proxy makes bub-mcp the authorization server clients see, in front
	// of Issuer (oauthproxy.go); nil means clients go to Issuer directly.
	Proxy *OAuthProxy `toml:"proxy"`
}

// Introspection is [auth.oauth.introspection]. The client secret is read
// from the variable ClientSecretEnv names, never written in bub.toml.
type Introspection struct {
	URL             string `toml:"url"`
	ClientID        string `toml:"client_id"`
	ClientSecretEnv string `toml:"client_secret_env"`
	// ClientSecret is filled from ClientSecretEnv at load; not a key.
	ClientSecret string `toml:"-"`
}

// OAuthRule is one [[auth.oauth.rules]]: a token whose Claim has Value
// (or, for an array claim, contains it; "@example.com" matches an email
// domain) may use Profile.
type OAuthRule struct {
	Claim   string `toml:"claim"`
	Value   string `toml:"value"`
	Profile string `toml:"profile"`
	// Console also lets a matching token use the whole operator console
	// (as an [[auth.tokens]] token with admin = true).
	Console bool `toml:"console"`
}

// Token maps a bearer token to a profile. Only the token's SHA-256 is
// stored; Env names a variable holding the token itself (for containers).
type Token struct {
	Name    string `toml:"name"`
	SHA256  string `toml:"sha256"`
	Env     string `toml:"env"`
	Profile string `toml:"profile"`
	// Admin lets the token's holder use the whole operator console
	// (bub-mcp console): every principal's calls and approvals, sessions
	// and upstreams. Other tokens see only their own calls there.
	Admin bool `toml:"admin"`
}

// Duration is a time.Duration written as "30s" in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("not a duration (want e.g. \"30s\"): %q", b)
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration back.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Size is a byte count written as an integer or a string with a unit:
// "512KiB", "256MiB", "1GiB" (powers of 1024; K, M, G, KB, MB, GB and
// lower case mean the same), or plain digits.
type Size int64

// UnmarshalTOML accepts an integer or a string with a unit.
func (s *Size) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return fmt.Errorf("negative size %d", x)
		}
		*s = Size(x)
		return nil
	case string:
		n, err := ParseSize(x)
		if err != nil {
			return err
		}
		*s = Size(n)
		return nil
	}
	return fmt.Errorf("not a size (want e.g. \"256MiB\" or a number of bytes): %v", v)
}

// ParseSize parses a Size's string form.
func ParseSize(str string) (int64, error) {
	t := strings.TrimSpace(str)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("not a size (want e.g. \"256MiB\"): %q", str)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a size: %q: %v", str, err)
	}
	var mult int64
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
		mult = 1
	case "k", "kb", "kib":
		mult = 1 << 10
	case "m", "mb", "mib":
		mult = 1 << 20
	case "g", "gb", "gib":
		mult = 1 << 30
	case "t", "tb", "tib":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("not a size (units: KiB, MiB, GiB, TiB): %q", str)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q is too large", str)
	}
	return n * mult, nil
}

// Default is the zero configuration: one profile with every tool, working
// in the current directory.
func Default() *Config {
	c := &Config{}
	c.fill("")
	return c
}

// fill applies defaults for everything the file left out.
func (c *Config) fill(dir string) {
	if c.Server.SessionIdleTTL.Duration == 0 {
		c.Server.SessionIdleTTL.Duration = 30 * time.Minute
	}
	if c.Server.ShutdownGrace.Duration == 0 {
		c.Server.ShutdownGrace.Duration = 10 * time.Second
	}
	if c.Server.AuditCommitInterval.Duration == 0 {
		c.Server.AuditCommitInterval.Duration = 50 * time.Millisecond
	}
	if c.Profiles == nil {
		c.Profiles = map[string]*Profile{}
	}
	if _, ok := c.Profiles[DefaultProfile]; !ok {
		c.Profiles[DefaultProfile] = &Profile{}
	}
	for name, p := range c.Profiles {
		p.Name = name
		if p.Environment == nil {
			key := []string{"profiles", name, "environment"}
			p.Environment = &ModuleRef{cfg: c, Table: key, KindKey: key}
		}
		if p.Workspace != "" {
			p.Workspace = ExpandHome(p.Workspace)
			if !filepath.IsAbs(p.Workspace) && dir != "" {
				p.Workspace = filepath.Join(dir, p.Workspace)
			}
		}
	}
}

// environments reads each profile's environment key in either spelling
// (see ModuleRef), with [profiles.<name>.sandbox] as the old sibling
// table of kind "sandbox".
func (c *Config) environments() error {
	var raw map[string]*struct {
		Environment toml.Primitive `toml:"environment"`
		Sandbox     toml.Primitive `toml:"sandbox"`
	}
	if err := c.Decode("profiles", &raw); err != nil {
		return err
	}
	for _, name := range c.ProfileNames() {
		p, r := c.Profiles[name], raw[name]
		if p == nil || r == nil {
			continue
		}
		ref, err := c.ModuleRefAt(r.Environment, "sandbox", r.Sandbox, "profiles", name, "environment")
		if err != nil {
			return err
		}
		p.Environment = ref
	}
	return nil
}

// ProfileNames returns the profile names, sorted.
func (c *Config) ProfileNames() []string {
	out := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Load reads and validates a file. getenv resolves token env references.
func Load(path string, getenv func(string) string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, string(src), getenv)
}

// decodeErrRE matches the toml package's type errors, which carry the
// line and key only in their text; compiled on first use, as only a bad
// file needs it.
var decodeErrRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)
})

// validSHA256 reports whether s is 64 lowercase hex digits.
func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkOrigin accepts an origin as browsers send it in the Origin
// header: scheme://host[:port], lower case, http or https, nothing after.
func checkOrigin(o string) error {
	if o == "*" || o == "null" {
		return fmt.Errorf("%q is not allowed: list exact origins such as \"http://localhost:6274\" (any web page could otherwise drive the tools)", o)
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return fmt.Errorf("%q is not an origin: want scheme://host[:port] (http or https, no path), as in \"http://localhost:6274\"", o)
	}
	if o != strings.ToLower(o) {
		return fmt.Errorf("%q: write the origin in lower case, as browsers send it", o)
	}
	return nil
}

// Parse validates TOML source; name is used in error messages.
func Parse(name, src string, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Config{Path: name, src: src, claimed: map[string]bool{}}
	var top map[string]toml.Primitive
	md, err := toml.Decode(src, &top)
	if err != nil {
		return nil, c.decodeError(err)
	}
	c.md, c.tables = md, top
	for _, t := range []struct {
		key string
		dst any
	}{{"server", &c.Server}, {"profiles", &c.Profiles}, {"auth", &c.Auth}} {
		if err := c.Decode(t.key, t.dst); err != nil { // a fixed order: the same bad table is reported each time
			return nil, err
		}
	}
	if err := c.environments(); err != nil {
		return nil, err
	}
	fail := c.Fail
	if c.Server.MaxMessageBytes < 0 {
		return nil, fail("must be >= 0", "server", "max_message_bytes")
	}
	if c.Server.MaxConcurrentRequests < 0 {
		return nil, fail("must be >= 0", "server", "max_concurrent_requests")
	}
	if c.Server.MaxConcurrentPerClient < 0 {
		return nil, fail("must be >= 0", "server", "max_concurrent_per_client")
	}
	for _, o := range c.Server.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			return nil, fail(err.Error(), "server", "cors_origins")
		}
	}
	if c.Server.MaxSessions < 0 {
		return nil, fail("must be >= 0", "server", "max_sessions")
	}
	if c.Server.MaxSessionsPerPrincipal < 0 {
		return nil, fail("must be >= 0", "server", "max_sessions_per_principal")
	}
	for pname, p := range c.Profiles {
		if !ident.Word(pname) {
			return nil, fail("profile names must match ^[a-zA-Z0-9_-]{1,64}$", "profiles", pname)
		}
		if p == nil {
			continue
		}
		if err := providers.CheckGlobs(p.Tools); err != nil {
			return nil, fail(err.Error(), "profiles", pname, "tools")
		}
		if err := providers.CheckGlobs(p.Deny); err != nil {
			return nil, fail(err.Error(), "profiles", pname, "deny")
		}
		for _, pat := range p.Sessions {
			if strings.TrimSpace(pat) == "" {
				return nil, fail("empty session pattern", "profiles", pname, "sessions")
			}
		}
		if err := CheckToolRules(p.Confirm); err != nil {
			return nil, fail(err.Error(), "profiles", pname, "confirm")
		}
		if err := CheckToolRules(p.CodeModeTools); err != nil {
			return nil, fail(err.Error(), "profiles", pname, "code_mode_tools")
		}
		seen := map[string]bool{}
		for _, v := range p.ConfirmVia {
			if v != "elicitation" && v != "console" {
				return nil, fail(fmt.Sprintf("unknown way %q (known: \"elicitation\", \"console\")", v), "profiles", pname, "confirm_via")
			}
			if seen[v] {
				return nil, fail(fmt.Sprintf("%q is listed twice", v), "profiles", pname, "confirm_via")
			}
			seen[v] = true
		}
	}
	dir := ""
	if name != "" {
		if abs, err := filepath.Abs(name); err == nil {
			dir = filepath.Dir(abs)
		}
	}
	c.fill(dir)
	for i := range c.Auth.Tokens {
		t := &c.Auth.Tokens[i]
		if t.Name == "" {
			t.Name = fmt.Sprintf("token%d", i+1)
		}
		if t.Profile == "" {
			t.Profile = DefaultProfile
		}
		if _, ok := c.Profiles[t.Profile]; !ok {
			return nil, fail(fmt.Sprintf("unknown profile %q (defined: %s)", t.Profile, strings.Join(c.ProfileNames(), ", ")), "auth", "tokens", "profile")
		}
		switch {
		case t.SHA256 != "" && t.Env != "":
			return nil, fail("set sha256 or env, not both", "auth", "tokens", "sha256")
		case t.SHA256 != "":
			t.SHA256 = strings.ToLower(t.SHA256)
			if !validSHA256(t.SHA256) {
				return nil, fail("must be the token's SHA-256 as 64 hex digits (never the token itself): printf %s TOKEN | sha256sum", "auth", "tokens", "sha256")
			}
		case t.Env != "":
			v := getenv(t.Env)
			if v == "" {
				return nil, fail(fmt.Sprintf("environment variable %s is empty or unset", t.Env), "auth", "tokens", "env")
			}
			t.SHA256 = HashToken(v)
		default:
			return nil, fail("a token needs sha256 or env", "auth", "tokens", "sha256")
		}
	}
	if err := c.checkOAuth(getenv, fail); err != nil {
		return nil, err
	}
	return c, nil
}

// checkOAuth validates [auth.oauth] and [server] public_url and reads the
// introspection secret from its variable.
func (c *Config) checkOAuth(getenv func(string) string, fail func(string, ...string) error) error {
	if u := c.Server.PublicURL; u != "" {
		// Bearer tokens travel to this URL: with OAuth it must be https
		// (or a loopback http for a local try).
		if err := checkHTTPURL(u, c.Auth.OAuth != nil); err != nil {
			return fail(err.Error(), "server", "public_url")
		}
	}
	o := c.Auth.OAuth
	if o == nil {
		return nil
	}
	if o.Issuer == "" {
		return fail("needs issuer: the authorization server's issuer URL", "auth", "oauth")
	}
	if err := checkHTTPURL(o.Issuer, true); err != nil {
		return fail(err.Error(), "auth", "oauth", "issuer")
	}
	if c.Server.PublicURL == "" {
		return fail("needs [server] public_url: the URL clients reach this server at, which tokens must name as their audience", "auth", "oauth")
	}
	if o.JWKSURL != "" {
		if err := checkHTTPURL(o.JWKSURL, true); err != nil {
			return fail(err.Error(), "auth", "oauth", "jwks_url")
		}
	}
	if o.ClockSkew.Duration > 5*time.Minute {
		return fail("at most 5m", "auth", "oauth", "clock_skew")
	}
	if len(o.Rules) == 0 {
		return fail("needs at least one [[auth.oauth.rules]]: it says which tokens may use which profile", "auth", "oauth")
	}
	for _, r := range o.Rules {
		if r.Claim == "" || r.Value == "" {
			return fail("claim and value are required", "auth", "oauth", "rules")
		}
		if _, ok := c.Profiles[r.Profile]; !ok {
			return fail(fmt.Sprintf("unknown profile %q (defined: %s)", r.Profile, strings.Join(c.ProfileNames(), ", ")), "auth", "oauth", "rules", "profile")
		}
	}
	if in := o.Introspection; in != nil {
		if in.URL != "" {
			if err := checkHTTPURL(in.URL, true); err != nil {
				return fail(err.Error(), "auth", "oauth", "introspection", "url")
			}
		}
		if in.ClientSecretEnv != "" {
			in.ClientSecret = getenv(in.ClientSecretEnv)
			if in.ClientSecret == "" {
				return fail(fmt.Sprintf("environment variable %s is empty or unset", in.ClientSecretEnv), "auth", "oauth", "introspection", "client_secret_env")
			}
		}
	}
	return c.checkProxy(getenv, fail)
}

// checkHTTPURL accepts an absolute https URL, and http on a loopback host
// (a local IdP, tests) or, with loopbackHTTPOnly false, on any host.
func checkHTTPURL(raw string, loopbackHTTPOnly bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("want an absolute http(s) URL, got %q", raw)
	}
	if u.Fragment != "" || u.RawQuery != "" {
		return fmt.Errorf("want a URL without query or fragment, got %q", raw)
	}
	if u.Scheme == "http" && loopbackHTTPOnly {
		if !hostcheck.Loopback(u.Hostname()) {
			return fmt.Errorf("http is accepted on a loopback host only; use https: %q", raw)
		}
	}
	return nil
}

// decodeError names the file, line and key of a TOML error, as every
// configuration error does.
func (c *Config) decodeError(err error) error {
	var pe toml.ParseError // the toml package returns it by value
	if errors.As(err, &pe) {
		key := pe.LastKey
		if key == "" {
			key = "(syntax)"
		}
		return fmt.Errorf("config: %s:%d: %s: %s", c.Path, pe.Position.Line, key, pe.Message)
	}
	if m := decodeErrRE().FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("config: %s:%s: %s: %s", c.Path, m[1], m[2], typeMessage(m[3]))
	}
	return fmt.Errorf("config: %s: %v", c.Path, err)
}

// typeMessage says the toml package's "incompatible types: TOML value has
// type int64; destination has type slice" in the words of TOML rather
// than of Go, saying what to write: want a list such as ["a", "b"], not a
// whole number. Other messages pass unchanged.
func typeMessage(msg string) string {
	got, want, ok := strings.Cut(strings.TrimPrefix(msg, "incompatible types: TOML value has type "), "; destination has type ")
	if !ok || !strings.HasPrefix(msg, "incompatible types: ") {
		return msg
	}
	wants := map[string]string{
		"map":                     "a table",
		"slice":                   `a list such as ["a", "b"]`,
		"string":                  `a string in quotes`,
		"primitive (string-like)": `a string in quotes`,
		"float":                   "a number",
		"integer":                 "a whole number",
		"boolean":                 "true or false",
	}
	gots := map[string]string{
		"string":           "a string",
		"int64":            "a whole number",
		"float64":          "a number",
		"bool":             "a boolean",
		"[]any":            "a list",
		"[]map[string]any": "a list of tables",
		"map[string]any":   "a table",
	}
	w, okw := wants[want]
	g, okg := gots[got]
	if !okg && strings.HasPrefix(got, "time.") {
		g, okg = "a date or time", true
	}
	if !okw || !okg {
		return msg
	}
	return "want " + w + ", not " + g
}

// Decode decodes the top-level table key (such as "codemode") into v, a
// pointer to a struct with toml tags; a missing table leaves v as it is.
// Several modules may decode keys of one table. Only the keys some
// decoder knows count as known (see Check).
func (c *Config) Decode(key string, v any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claimed == nil {
		c.claimed = map[string]bool{}
	}
	c.claimed[key] = true
	prim, ok := c.tables[key]
	if !ok {
		return nil
	}
	if err := c.md.PrimitiveDecode(prim, v); err != nil {
		return c.decodeError(err)
	}
	return nil
}

// Check refuses the configuration when it has a table or key that nothing
// decoded: a misspelt key fails loudly instead of being ignored. Call it
// after every module has decoded its table.
func (c *Config) Check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var tables []string
	for k := range c.tables {
		if !c.claimed[k] {
			tables = append(tables, k)
		}
	}
	if len(tables) > 0 {
		sort.Strings(tables)
		k := tables[0]
		if t := c.md.Type(k); t != "Hash" && t != "ArrayHash" {
			// A key above every table ("metrics = true" on line 1) is
			// not a table: say where keys go.
			return fmt.Errorf("config: %s:%d: %s: unknown key (keys go in a table, such as [server]; see bub.toml.example)", c.Path, lineOf(c.src, []string{k}), k)
		}
		return fmt.Errorf("config: %s:%d: %s: unknown table (see bub.toml.example)", c.Path, lineOf(c.src, []string{k}), k)
	}
	if und := c.md.Undecoded(); len(und) > 0 {
		k := und[0]
		return fmt.Errorf("config: %s:%d: %s: unknown key (see bub.toml.example)", c.Path, lineOf(c.src, k), k.String())
	}
	return nil
}

// Undecoded returns the keys under the key path (such as "upstreams")
// that no decoder has read so far, in the file's order. A module whose
// checks would misread a misspelt key (comand = "x" is not "command is
// required") refuses them first; Check refuses the rest at the end.
func (c *Config) Undecoded(key ...string) [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][]string
	for _, k := range c.md.Undecoded() {
		if len(k) > len(key) && slices.Equal(k[:len(key)], key) {
			out = append(out, append([]string(nil), k...))
		}
	}
	return out
}

// Fail returns the error for a bad value at the key path (such as
// "codemode", "max_calls"), naming the file and line that set it, as
// syntax errors do.
func (c *Config) Fail(msg string, key ...string) error {
	return fmt.Errorf("config: %s:%d: %s: %s", c.Path, lineOf(c.src, key), strings.Join(key, "."), msg)
}

// HashToken is the hex SHA-256 of a bearer token, as stored in bub.toml.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// lineOf finds the line that defines a key path (table headers and
// dotted keys), so semantic errors can name a line as syntax errors do.
// It returns 0 when the key cannot be found (defaults, env).
func lineOf(src string, key []string) int {
	if len(key) == 0 {
		return 0
	}
	want := strings.Join(key, ".")
	table := ""
	best := 0
	// A key the file does not set (a required one missing, or misspelt)
	// is placed at the header of the deepest table that would hold it,
	// rather than at line 0.
	within, withinLen := 0, -1
	for i, raw := range strings.Split(src, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			h := strings.Trim(strings.SplitN(line, "#", 2)[0], "[] \t")
			table = normalizeKey(h)
			if table == want && best == 0 {
				best = i + 1
			}
			if strings.HasPrefix(want, table+".") && len(table) > withinLen {
				within, withinLen = i+1, len(table)
			}
			continue
		}
		eq := strings.Index(line, "=")
		if eq < 0 {
			continue
		}
		k := normalizeKey(line[:eq])
		full := k
		if table != "" {
			full = table + "." + k
		}
		if full == want {
			return i + 1
		}
		if best == 0 && strings.HasPrefix(want, full+".") {
			best = i + 1
		}
	}
	if best == 0 {
		return within
	}
	return best
}

func normalizeKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// ExpandHome expands a leading ~ of a path a user wrote (a workspace key,
// --workspace, $BUB_HOME, $BUB_CONFIG) to the home directory: a client's
// JSON reaches bub-mcp without a shell, and bash leaves the ~ of
// --workspace=~/x alone. Other paths, and a home that cannot be found,
// come back as they are.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, p[1:])
		}
	}
	return p
}
