package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/ident"
	"github.com/bubbuild/bub-mcp/sandbox"
)

// Defaults of the [upstreams.<name>] settings, each next to its use.
const (
	// DefaultTimeout bounds one call to an upstream tool.
	DefaultTimeout = 5 * time.Minute
	// DefaultStartTimeout bounds starting an upstream (spawn, initialize,
	// tools/list): start-up waits at most this long for eager upstreams,
	// and a call waits at most this long for its upstream to come back.
	DefaultStartTimeout = 20 * time.Second
	// DefaultMaxMessageBytes bounds one message from an upstream (a
	// stdio line, an HTTP response body).
	DefaultMaxMessageBytes = 64 << 20
	// AuthOAuth is the value of auth for per-principal OAuth.
	AuthOAuth = "oauth"
	// AuthTokenExchange is the value of auth for RFC 8693 token
	// exchange of each caller's own OAuth token (tokenexchange.go).
	AuthTokenExchange = "token_exchange"
	// DefaultMaxConnections bounds the live per-principal connections
	// of an auth = "oauth" or "token_exchange" server.
	DefaultMaxConnections = 64
	// DefaultIdleTimeout closes a per-principal connection unused that
	// long.
	DefaultIdleTimeout = 10 * time.Minute
	// StartLazy and StartEager are the values of start.
	StartLazy  = "lazy"
	StartEager = "eager"
)

// Server is one upstream MCP server: the [upstreams.<name>] table of
// bub.toml, or an entry of $BUB_HOME/mcp.json. Exactly one of Command
// (stdio) and URL (streamable HTTP, or HTTP+SSE) is set.
type Server struct {
	// Command starts a stdio server; Args, Env (added to bub-mcp's own
	// environment) and Cwd (default: the current directory) go with it.
	Command string            `toml:"command"`
	Args    []string          `toml:"args"`
	Env     map[string]string `toml:"env"`
	Cwd     string            `toml:"cwd"`
	// Environment names the registered environment (package environment)
	// a stdio server runs in: "local" (the default) on the host, in a
	// process group and, where cgroups are writable, a cgroup of its own;
	// "sandbox" in bubblewrap, with Sandbox's policy. Either way the
	// environment's supervisor ends the server's whole tree.
	Environment string `toml:"environment"`
	// Sandbox is [upstreams.<name>.sandbox], with the keys of a profile's
	// sandbox table (network, read_only, read_write, memory, ...); only
	// with environment = "sandbox".
	Sandbox *sandbox.Config `toml:"sandbox"`
	// URL is a streamable HTTP endpoint; Headers are sent with every
	// request and BearerTokenEnv names a variable whose value is sent as
	// "Authorization: Bearer <value>".
	URL            string            `toml:"url"`
	Headers        map[string]string `toml:"headers"`
	BearerTokenEnv string            `toml:"bearer_token_env"`
	// Auth = "oauth" makes bub-mcp the OAuth client of an HTTP server,
	// with one token set per (principal, server) (credentials.go): the
	// server's 401 and RFC 9728 metadata find its authorization server,
	// ClientID (else dynamic registration, with ClientName) and the secret
	// in $ClientSecretEnv identify bub-mcp there, Scopes are asked for.
	// Empty means the Headers and BearerTokenEnv, alike for every
	// principal. Auth = "token_exchange" trades each caller's own OAuth
	// access token, at its issuer, for one whose audience is the server
	// (RFC 8693; tokenexchange.go). With either, MaxConnections bounds the
	// live per-principal connections (the least recently used idle one
	// is closed for a new one), and IdleTimeout closes one unused that
	// long.
	Auth            string          `toml:"auth"`
	ClientID        string          `toml:"client_id"`
	ClientSecretEnv string          `toml:"client_secret_env"`
	Scopes          []string        `toml:"scopes"`
	ClientName      string          `toml:"client_name"`
	MaxConnections  int             `toml:"max_connections"`
	IdleTimeout     config.Duration `toml:"idle_timeout"`
	// Type is the URL's transport: "http" (the default: streamable HTTP)
	// or "sse" (the 2024 HTTP+SSE transport, which older servers speak).
	Type string `toml:"type"`
	// Tools and Deny are globs over the upstream's tools (their runtime
	// "<server>.<tool>" or model "<server>_<tool>" names, or the upstream's
	// own tool names), case-sensitive; empty Tools means all, Deny wins.
	Tools []string `toml:"tools"`
	Deny  []string `toml:"deny"`
	// Defer leaves the tools out of tools/list until tool.describe loads
	// them.
	Defer bool `toml:"defer"`
	// Timeout bounds one call; zero means DefaultTimeout.
	Timeout config.Duration `toml:"timeout"`
	// StartTimeout bounds a start; zero means DefaultStartTimeout.
	StartTimeout config.Duration `toml:"start_timeout"`
	// MaxMessageBytes bounds one message from the server; zero means
	// DefaultMaxMessageBytes. A stdio server that sends more is restarted;
	// an HTTP response over it fails its call.
	MaxMessageBytes int64 `toml:"max_message_bytes"`
	// Start is "eager" (the default: connect at start-up) or "lazy"
	// (connect on the first call; the tool list of the last connection is
	// remembered under $BUB_HOME, and without one the first start is
	// eager).
	Start string `toml:"start"`
	// Pin guards against a server changing its tools under its users:
	// "strict" (the default) pins each tool's definition on first use
	// and quarantines a changed or new tool until a human approves it;
	// "approve-first" quarantines even the first list; "warn" lists them
	// with a warning and an audit record; "off" does not pin.
	Pin string `toml:"pin"`
	// Overrides are [upstreams.<name>.overrides.<tool>], keyed by the
	// tool's name as the upstream lists it: renames, titles,
	// descriptions, hints and fixed arguments (see Override). One naming
	// a tool the server does not list is a warning, since the tool may
	// come later. bub.toml only.
	Overrides map[string]*Override `toml:"overrides"`

	name   string // the table's name
	origin string // "bub.toml" or the mcp.json path, for messages
	// envModule is the environment.sandbox module Sandbox configures,
	// checked, with [sandbox] as its defaults; set by the module for
	// environment = "sandbox", nil otherwise.
	envModule environment.Module
}

// validServerName reports whether name may be a server name
// (^[a-zA-Z0-9_-]{1,32}$): it becomes the tools' namespace, so it must fit
// the model-name rule.
func validServerName(name string) bool { return len(name) <= 32 && ident.Word(name) }

// failFunc reports a bad value at a key path under the server's table.
type failFunc func(msg string, key ...string) error

// check validates a server's settings and fills in defaults.
func (s *Server) check(fail failFunc) error {
	if !validServerName(s.name) {
		return fail("server name must match ^[a-zA-Z0-9_-]{1,32}$ (it prefixes the tool names)")
	}
	switch s.Type {
	case "", "http", "sse":
		if s.Type != "" && s.URL == "" {
			return fail(fmt.Sprintf("type %q needs a url", s.Type), "url")
		}
	case "stdio":
		if s.URL != "" {
			return fail(`type "stdio" has no url`, "url")
		}
	default:
		return fail(fmt.Sprintf("unknown type %q (want stdio, http or sse)", s.Type), "type")
	}
	switch {
	case s.Command == "" && s.URL == "":
		return fail("one of command (stdio) or url (streamable HTTP) is required", "command")
	case s.Command != "" && s.URL != "":
		return fail("command and url are exclusive: a server is stdio or HTTP", "url")
	}
	if s.URL != "" {
		// The URL is not quoted: it may carry a ${VAR} expanded from a secret.
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fail("not an http(s) URL (want http:// or https:// and a host)", "url")
		}
		for _, k := range []string{"args", "env", "cwd", "environment", "sandbox"} {
			if (k == "args" && len(s.Args) > 0) || (k == "env" && len(s.Env) > 0) || (k == "cwd" && s.Cwd != "") ||
				(k == "environment" && s.Environment != "") || (k == "sandbox" && s.Sandbox != nil) {
				return fail("only for stdio servers (command)", k)
			}
		}
	} else {
		if len(s.Headers) > 0 {
			return fail("only for HTTP servers (url)", "headers")
		}
		if s.BearerTokenEnv != "" {
			return fail("only for HTTP servers (url)", "bearer_token_env")
		}
		if _, err := environment.Lookup(s.envName()); err != nil {
			return fail(strings.TrimPrefix(err.Error(), "environment: "), "environment")
		}
		if s.Sandbox != nil && s.envName() != environment.SandboxName {
			return fail(fmt.Sprintf("only with environment = %q", environment.SandboxName), "sandbox")
		}
	}
	if err := s.checkAuth(fail); err != nil {
		return err
	}
	for k := range s.Headers {
		if strings.TrimSpace(k) == "" || strings.ContainsAny(k, " :\r\n") {
			return fail(fmt.Sprintf("bad header name %q", k), "headers")
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fail(fmt.Sprintf("bad variable name %q", k), "env")
		}
	}
	for _, key := range []string{"tools", "deny"} {
		globs := s.Tools
		if key == "deny" {
			globs = s.Deny
		}
		for _, g := range globs {
			if strings.TrimSpace(g) == "" {
				return fail("empty pattern", key)
			}
			if _, err := path.Match(g, ""); err != nil {
				return fail(fmt.Sprintf("bad pattern %q: %v", g, err), key)
			}
		}
	}
	renamed := map[string]string{}
	for _, tool := range sortedKeys(s.Overrides) {
		o := s.Overrides[tool]
		if err := o.check(s.name, tool, fail); err != nil {
			return err
		}
		if o.Name != "" {
			if prev, dup := renamed[strings.ToLower(o.Name)]; dup {
				return fail(fmt.Sprintf("%q is also the new name of %q", o.Name, prev), "overrides", tool, "name")
			}
			renamed[strings.ToLower(o.Name)] = tool
		}
	}
	switch s.Start {
	case "":
		s.Start = StartEager
	case StartEager, StartLazy:
	default:
		return fail(fmt.Sprintf("must be %q or %q, not %q", StartLazy, StartEager, s.Start), "start")
	}
	switch s.Pin {
	case "":
		s.Pin = PinStrict
	case PinStrict, PinApproveFirst, PinWarn, PinOff:
	default:
		return fail(fmt.Sprintf("must be %q, %q, %q or %q, not %q", PinStrict, PinApproveFirst, PinWarn, PinOff, s.Pin), "pin")
	}
	if s.Timeout.Duration == 0 {
		s.Timeout.Duration = DefaultTimeout
	}
	if s.StartTimeout.Duration == 0 {
		s.StartTimeout.Duration = DefaultStartTimeout
	}
	switch {
	case s.MaxMessageBytes < 0:
		return fail("must be >= 0", "max_message_bytes")
	case s.MaxMessageBytes == 0:
		s.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return nil
}

// allowed reports whether the upstream tool named tool (runtime name
// runtime) passes the server's tools and deny globs.
func (s *Server) allowed(tool, runtime string) bool {
	match := func(globs []string) bool {
		for _, g := range globs {
			for _, n := range []string{tool, runtime, strings.ReplaceAll(runtime, ".", "_")} {
				if ok, _ := path.Match(g, n); ok {
					return true
				}
			}
		}
		return false
	}
	if len(s.Tools) > 0 && !match(s.Tools) {
		return false
	}
	return !match(s.Deny)
}

// envName is the environment a stdio server runs in.
func (s *Server) envName() string {
	if s.Environment == "" {
		return environment.DefaultName
	}
	return s.Environment
}

// kind is "stdio", "http" or "sse".
func (s *Server) kind() string {
	switch {
	case s.URL == "":
		return "stdio"
	case s.Type == "sse":
		return "sse"
	}
	return "http"
}

// MCPJSONName is the Claude-Desktop-style file under $BUB_HOME whose
// servers are mounted next to bub.toml's.
const MCPJSONName = "mcp.json"

// maxMCPJSONBytes bounds the file: it is configuration, never data.
const maxMCPJSONBytes = 1 << 20

// mcpJSONServer is one entry of mcp.json's "mcpServers" (or VS Code's
// "servers"): a stdio server ({"command","args","env"}) or an HTTP one
// ({"url","type","headers"}; Gemini CLI's "httpUrl" is a streamable HTTP
// url). "disabled": true leaves it out. Fields of other clients' dialects
// ("autoApprove", "alwaysAllow", "trust", "timeout", ...) are ignored.
// mcpJSONServerShape (mcpjson.go) lists the same fields, in the file's
// words, for errors.
type mcpJSONServer struct {
	Command  string            `json:"command"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	Cwd      string            `json:"cwd"`
	URL      string            `json:"url"`
	HTTPURL  string            `json:"httpUrl"`
	Type     string            `json:"type"`
	OldType  string            `json:"transportType"` // Cline's former "type"
	Headers  map[string]string `json:"headers"`
	Disabled bool              `json:"disabled"`
}

// mcpJSON is what readMCPJSON found: the servers to mount, and what it
// left out, for one log line each.
type mcpJSON struct {
	servers  []*Server
	disabled []string // names of "disabled": true servers
	ignored  []string // "<server>.<field>" of fields bub-mcp does not read
}

// readMCPJSON reads $BUB_HOME/mcp.json, in any of the major clients'
// dialects; a missing file is no servers. ${VAR} and ${env:VAR} (and
// ${VAR:-default}) are expanded from getenv in command, args, env, cwd, url
// and headers; an unset variable without a default is an error naming it
// (never its value). Entries are checked like bub.toml's; errors name the
// file, line and column, and key path (mcpServers.<server>.<key>).
func readMCPJSON(file string, getenv func(string) string) (*mcpJSON, error) {
	out := &mcpJSON{}
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err // the *PathError names the file
	}
	defer f.Close()
	// Syntax and shape first, so that errors say line:column and what to
	// write; the decoding below then cannot fail on a type.
	jd, err := readJSONDoc(file, f, mcpJSONShape)
	if err != nil {
		return nil, err
	}
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		Servers    map[string]json.RawMessage `json:"servers"` // VS Code's .vscode/mcp.json
	}
	if err := json.NewDecoder(bytes.NewReader(jd.src)).Decode(&doc); err != nil {
		return nil, jd.failAt(err.Error())
	}
	entries := map[string]json.RawMessage{}
	keyOf := map[string]string{}
	for _, part := range []struct {
		key string
		m   map[string]json.RawMessage
	}{{"mcpServers", doc.MCPServers}, {"servers", doc.Servers}} {
		for name, raw := range part.m {
			if prev, dup := keyOf[name]; dup {
				return nil, jd.failAt(fmt.Sprintf("server %q is in both %s and %s", name, prev, part.key), part.key, name)
			}
			entries[name], keyOf[name] = raw, part.key
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		fail := func(msg string, key ...string) error {
			return jd.failAt(msg, append([]string{keyOf[name], name}, key...)...)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(entries[name], &fields); err != nil {
			return nil, fail(err.Error())
		}
		for k := range fields {
			if mcpJSONServerShape.fields[k] == nil {
				out.ignored = append(out.ignored, name+"."+k)
			}
		}
		var e mcpJSONServer
		if err := json.Unmarshal(entries[name], &e); err != nil {
			return nil, fail(err.Error())
		}
		if e.Disabled {
			out.disabled = append(out.disabled, name)
			continue
		}
		s, err := e.server(getenv, fail)
		if err != nil {
			return nil, err
		}
		s.name, s.origin = name, file
		if err := s.check(fail); err != nil {
			return nil, err
		}
		out.servers = append(out.servers, s)
	}
	sort.Strings(out.ignored)
	return out, nil
}

// server is the entry as a Server, its variables expanded.
func (e *mcpJSONServer) server(getenv func(string) string, fail failFunc) (*Server, error) {
	if e.Type == "" {
		e.Type = e.OldType
	}
	s := &Server{Type: e.Type}
	if len(e.Env) > 0 {
		s.Env = map[string]string{}
	}
	if len(e.Headers) > 0 {
		s.Headers = map[string]string{}
	}
	switch e.Type {
	case "streamable-http", "streamableHttp", "streamable_http":
		s.Type = "http"
	}
	url := e.URL
	if e.HTTPURL != "" {
		if e.URL != "" {
			return nil, fail(`"url" and "httpUrl" are exclusive`, "httpUrl")
		}
		url = e.HTTPURL
		if s.Type == "" {
			s.Type = "http"
		}
	}
	var err error
	expand := func(v string, key ...string) string {
		if err != nil {
			return ""
		}
		var out string
		if out, err = expandVars(v, getenv); err != nil {
			err = fail(err.Error(), key...)
		}
		return out
	}
	s.Command = expand(e.Command, "command")
	for i, a := range e.Args {
		s.Args = append(s.Args, expand(a, "args", fmt.Sprint(i)))
	}
	s.Cwd = expand(e.Cwd, "cwd")
	s.URL = expand(url, "url")
	for k, v := range e.Env {
		s.Env[k] = expand(v, "env", k)
	}
	for k, v := range e.Headers {
		s.Headers[k] = expand(v, "headers", k)
	}
	return s, err
}

// varRE is a ${NAME}, ${env:NAME} or ${NAME:-default} reference.
var varRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{(env:)?([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`) })

// expandVars replaces the variable references in v; an unset (or empty)
// variable without a default is an error naming it, so a server never
// starts with half an argument or an empty token.
func expandVars(v string, getenv func(string) string) (string, error) {
	if !strings.Contains(v, "${") {
		return v, nil
	}
	var missing []string
	out := varRE().ReplaceAllStringFunc(v, func(ref string) string {
		m := varRE().FindStringSubmatch(ref)
		if val := getenv(m[2]); val != "" {
			return val
		}
		if m[3] != "" {
			return m[4]
		}
		missing = append(missing, m[2])
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("$%s is unset or empty (${%s} is expanded from the environment; ${%s:-default} gives a default)", missing[0], missing[0], missing[0])
	}
	// What is left of v without the references bub-mcp expands: another
	// client's ${input:x} or ${workspaceFolder} is an error, not a literal.
	if rest := varRE().ReplaceAllString(v, ""); strings.Contains(rest, "${") {
		ref := rest[strings.Index(rest, "${"):]
		if j := strings.IndexByte(ref, '}'); j >= 0 {
			return "", fmt.Errorf("%s is not a variable bub-mcp expands (only ${VAR}, ${env:VAR} and ${VAR:-default})", ref[:j+1])
		}
	}
	return out, nil
}

// limitReader fails a read past n bytes, so an oversized file is an
// error rather than a truncated document.
type limitReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("larger than %d bytes", maxMCPJSONBytes)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// resolveCwd makes a stdio server's cwd, and its sandbox's paths,
// absolute against base (bub.toml's directory).
func (s *Server) resolveCwd(base string) {
	abs := func(p string) string {
		if p != "" && !filepath.IsAbs(p) && !strings.HasPrefix(p, "~") && base != "" {
			return filepath.Join(base, p)
		}
		return p
	}
	s.Cwd = abs(s.Cwd)
	if s.Sandbox != nil {
		for _, l := range [][]string{s.Sandbox.ReadOnly, s.Sandbox.ReadWrite} {
			for i, p := range l {
				l[i] = abs(p)
			}
		}
	}
}

// sortedKeys are m's keys in order, for messages that do not depend on
// map order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkAuth validates auth and its keys and fills in their defaults.
func (s *Server) checkAuth(fail failFunc) error {
	keys := []struct {
		key       string
		set       bool
		exchanges bool // allowed with auth = "token_exchange" too
	}{{"client_id", s.ClientID != "", false}, {"client_secret_env", s.ClientSecretEnv != "", false}, {"scopes", len(s.Scopes) > 0, false},
		{"client_name", s.ClientName != "", false}, {"max_connections", s.MaxConnections != 0, true}, {"idle_timeout", s.IdleTimeout.Duration != 0, true}}
	switch s.Auth {
	case "":
		for _, k := range keys {
			if k.set {
				return fail(`only with auth = "oauth"`, k.key)
			}
		}
		return nil
	case AuthOAuth:
	case AuthTokenExchange:
		for _, k := range keys {
			if k.set && !k.exchanges {
				return fail(`only with auth = "oauth" (token exchange acts as the caller's own client)`, k.key)
			}
		}
	default:
		return fail(fmt.Sprintf("unknown auth %q (want %q, %q, or none for headers and bearer_token_env)", s.Auth, AuthOAuth, AuthTokenExchange), "auth")
	}
	switch {
	case s.URL == "":
		return fail("only for HTTP servers (url)", "auth")
	case s.kind() != "http":
		return fail(fmt.Sprintf(`auth = %q needs the streamable HTTP transport (type = "http")`, s.Auth), "auth")
	case s.BearerTokenEnv != "":
		return fail(fmt.Sprintf(`bearer_token_env and auth = %q are exclusive: each principal's calls carry their own token`, s.Auth), "bearer_token_env")
	case s.ClientSecretEnv != "" && s.ClientID == "":
		return fail("needs client_id (the secret of a pre-registered client)", "client_secret_env")
	case s.MaxConnections < 0:
		return fail("must be >= 0", "max_connections")
	case s.IdleTimeout.Duration < 0:
		return fail("must be >= 0", "idle_timeout")
	}
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			return fail(fmt.Sprintf(`an Authorization header and auth = %q are exclusive`, s.Auth), "headers", k)
		}
	}
	if s.MaxConnections == 0 {
		s.MaxConnections = DefaultMaxConnections
	}
	if s.IdleTimeout.Duration == 0 {
		s.IdleTimeout.Duration = DefaultIdleTimeout
	}
	if s.ClientName == "" && s.Auth == AuthOAuth {
		s.ClientName = "bub-mcp"
	}
	return nil
}

// perPrincipal reports whether the server is connected to once per
// principal (auth = "oauth" or "token_exchange"), never shared.
func (s *Server) perPrincipal() bool { return s.Auth == AuthOAuth || s.Auth == AuthTokenExchange }

// tomlKeys are the keys of the table at the key path under a value of
// type t (a struct with toml tags, a map of them, or a pointer to
// either), for a misspelt key's "did you mean".
func tomlKeys(t reflect.Type, path []string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Map:
		if len(path) > 0 {
			return tomlKeys(t.Elem(), path[1:])
		}
	case reflect.Struct:
		var keys []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if len(path) > 0 && name == path[0] {
				return tomlKeys(f.Type, path[1:])
			}
			keys = append(keys, name)
		}
		if len(path) == 0 {
			return keys
		}
	}
	return nil
}
