package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/bubbuild/bub-mcp/config"
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
	// StartLazy and StartEager are the values of start.
	StartLazy  = "lazy"
	StartEager = "eager"
)

// Server is one upstream MCP server: the [upstreams.<name>] table of
// bub.toml, or an entry of $BUB_HOME/mcp.json. Exactly one of Command
// (stdio) and URL (streamable HTTP) is set.
type Server struct {
	// Command starts a stdio server; Args, Env (added to bub-mcp's own
	// environment) and Cwd (default: the current directory) go with it.
	Command string            `toml:"command"`
	Args    []string          `toml:"args"`
	Env     map[string]string `toml:"env"`
	Cwd     string            `toml:"cwd"`
	// URL is a streamable HTTP endpoint; Headers are sent with every
	// request and BearerTokenEnv names a variable whose value is sent as
	// "Authorization: Bearer <value>".
	URL            string            `toml:"url"`
	Headers        map[string]string `toml:"headers"`
	BearerTokenEnv string            `toml:"bearer_token_env"`
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

	name   string // the table's name
	origin string // "bub.toml" or the mcp.json path, for messages
}

// serverNameRE is what a server name may be: it becomes the tools'
// namespace, so it must fit the model-name rule.
var serverNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// failFunc reports a bad value at a key path under the server's table.
type failFunc func(msg string, key ...string) error

// check validates a server's settings and fills in defaults.
func (s *Server) check(fail failFunc) error {
	if !serverNameRE.MatchString(s.name) {
		return fail("server name must match ^[a-zA-Z0-9_-]{1,32}$ (it prefixes the tool names)")
	}
	switch {
	case s.Command == "" && s.URL == "":
		return fail("one of command (stdio) or url (streamable HTTP) is required", "command")
	case s.Command != "" && s.URL != "":
		return fail("command and url are exclusive: a server is stdio or HTTP", "url")
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fail(fmt.Sprintf("not an http(s) URL: %q", s.URL), "url")
		}
		for _, k := range []string{"args", "env", "cwd"} {
			if (k == "args" && len(s.Args) > 0) || (k == "env" && len(s.Env) > 0) || (k == "cwd" && s.Cwd != "") {
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
	switch s.Start {
	case "":
		s.Start = StartEager
	case StartEager, StartLazy:
	default:
		return fail(fmt.Sprintf("must be %q or %q, not %q", StartLazy, StartEager, s.Start), "start")
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

// kind is "stdio" or "http".
func (s *Server) kind() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// MCPJSONName is the Claude-Desktop-style file under $BUB_HOME whose
// servers are mounted next to bub.toml's.
const MCPJSONName = "mcp.json"

// maxMCPJSONBytes bounds the file: it is configuration, never data.
const maxMCPJSONBytes = 1 << 20

// mcpJSONServer is one entry of mcp.json's "mcpServers": a stdio server
// ({"command","args","env"}) or an HTTP one ({"url","type":"http","headers"}).
type mcpJSONServer struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Cwd     string            `json:"cwd"`
	URL     string            `json:"url"`
	Type    string            `json:"type"`
	Headers map[string]string `json:"headers"`
}

// readMCPJSON reads $BUB_HOME/mcp.json; a missing file is no servers. Its
// entries are checked like bub.toml's; errors name the file, server and
// key.
func readMCPJSON(file string) ([]*Server, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	defer f.Close()
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	dec := json.NewDecoder(&limitReader{r: f, n: maxMCPJSONBytes})
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", file, err)
	}
	names := make([]string, 0, len(doc.MCPServers))
	for n := range doc.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*Server
	for _, name := range names {
		fail := func(msg string, key ...string) error {
			return fmt.Errorf("upstream: %s: %s: %s", file, strings.Join(append([]string{"mcpServers", name}, key...), "."), msg)
		}
		var e mcpJSONServer
		d := json.NewDecoder(strings.NewReader(string(doc.MCPServers[name])))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return nil, fail(strings.TrimPrefix(err.Error(), "json: "))
		}
		switch e.Type {
		case "", "stdio":
			if e.URL != "" && e.Type == "stdio" {
				return nil, fail(`"type": "stdio" has no url`, "url")
			}
		case "http", "streamable-http", "streamableHttp":
			if e.URL == "" {
				return nil, fail(`"type": "`+e.Type+`" needs a url`, "url")
			}
		case "sse":
			return nil, fail(`"type": "sse" (the 2024 HTTP+SSE transport) is not supported; use a streamable HTTP url`, "type")
		default:
			return nil, fail(fmt.Sprintf("unknown type %q (want stdio or http)", e.Type), "type")
		}
		s := &Server{Command: e.Command, Args: e.Args, Env: e.Env, Cwd: e.Cwd, URL: e.URL, Headers: e.Headers, name: name, origin: file}
		if err := s.check(fail); err != nil {
			return nil, err
		}
		out = append(out, s)
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

// resolveCwd makes a stdio server's cwd absolute against base.
func (s *Server) resolveCwd(base string) {
	if s.Cwd != "" && !filepath.IsAbs(s.Cwd) && base != "" {
		s.Cwd = filepath.Join(base, s.Cwd)
	}
}
