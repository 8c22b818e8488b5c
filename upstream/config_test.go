package upstream_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/upstream"
)

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, toml, mcpJSON string
		want                []string // substrings of the error
	}{
		{name: "no transport", toml: "[upstreams.x]\ntools = [\"a\"]\n", want: []string{"upstreams.x.command", "one of command"}},
		{name: "both transports", toml: "[upstreams.x]\ncommand = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n", want: []string{"upstreams.x.url", "exclusive"}},
		{name: "bad url", toml: "[upstreams.x]\nurl = \"ftp://h/\"\n", want: []string{"upstreams.x.url", "not an http(s) URL"}},
		{name: "bad start", toml: "[upstreams.x]\ncommand = \"a\"\nstart = \"soon\"\n", want: []string{"upstreams.x.start", `"lazy"`}},
		{name: "bad glob", toml: "[upstreams.x]\ncommand = \"a\"\ndeny = [\"[\"]\n", want: []string{"upstreams.x.deny", "bad pattern"}},
		{name: "headers on stdio", toml: "[upstreams.x]\ncommand = \"a\"\nheaders = {A = \"b\"}\n", want: []string{"upstreams.x.headers", "only for HTTP"}},
		{name: "args on http", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nargs = [\"a\"]\n", want: []string{"upstreams.x.args", "only for stdio"}},
		{name: "bad name", toml: "[upstreams.\"a.b\"]\ncommand = \"a\"\n", want: []string{"upstreams.a.b", "server name"}},
		{name: "unknown key", toml: "[upstreams.x]\ncomand = \"a\"\ncommand = \"a\"\n", want: []string{"upstreams.x.comand", "unknown key"}},
		{name: "bad timeout", toml: "[upstreams.x]\ncommand = \"a\"\ntimeout = \"soon\"\n", want: []string{"upstreams.x.timeout", "not a duration"}},
		{name: "negative bound", toml: "[upstreams.x]\ncommand = \"a\"\nmax_message_bytes = -1\n", want: []string{"upstreams.x.max_message_bytes", ">= 0"}},
		{name: "environment on http", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nenvironment = \"sandbox\"\n", want: []string{"upstreams.x.environment", "only for stdio"}},
		{name: "unknown environment", toml: "[upstreams.x]\ncommand = \"a\"\nenvironment = \"docker\"\n", want: []string{"upstreams.x.environment", `unknown environment "docker"`, "local, sandbox"}},
		{name: "sandbox table without sandbox", toml: "[upstreams.x]\ncommand = \"a\"\n[upstreams.x.sandbox]\nnetwork = \"host\"\n", want: []string{"upstreams.x.sandbox", `only with environment = "sandbox"`}},
		{name: "bad sandbox network", toml: "[upstreams.x]\ncommand = \"a\"\nenvironment = \"sandbox\"\n[upstreams.x.sandbox]\nnetwork = \"wifi\"\n", want: []string{"bub.toml:5", "upstreams.x.sandbox.network", `must be "none" or "host"`}},
		{name: "bad sandbox key", toml: "[upstreams.x]\ncommand = \"a\"\nenvironment = \"sandbox\"\n[upstreams.x.sandbox]\nmemroy = \"1GiB\"\n", want: []string{"upstreams.x.sandbox.memroy", "unknown key"}},
		{name: "sandbox without bwrap", toml: "[sandbox]\nbwrap = \"/nonexistent/bwrap\"\n[upstreams.x]\ncommand = \"a\"\nenvironment = \"sandbox\"\n", want: []string{"sandbox.bwrap", `upstream "x" runs in the sandbox, which needs bubblewrap`}},
		{name: "unknown auth", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nauth = \"kerberos\"\n", want: []string{"upstreams.x.auth", `unknown auth "kerberos"`}},
		{name: "oauth on stdio", toml: "[upstreams.x]\ncommand = \"a\"\nauth = \"oauth\"\n", want: []string{"upstreams.x.auth", "only for HTTP"}},
		{name: "oauth on sse", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/sse\"\ntype = \"sse\"\nauth = \"oauth\"\n", want: []string{"upstreams.x.auth", "streamable HTTP"}},
		{name: "oauth and a shared token", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nauth = \"oauth\"\nbearer_token_env = \"T\"\n", want: []string{"upstreams.x.bearer_token_env", "exclusive"}},
		{name: "oauth and an Authorization header", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nauth = \"oauth\"\nheaders = {authorization = \"Bearer x\"}\n", want: []string{"upstreams.x.headers.authorization", "exclusive"}},
		{name: "oauth keys without oauth", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nscopes = [\"a\"]\n", want: []string{"upstreams.x.scopes", `only with auth = "oauth"`}},
		{name: "secret without client", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nauth = \"oauth\"\nclient_secret_env = \"S\"\n", want: []string{"upstreams.x.client_secret_env", "needs client_id"}},
		{name: "token exchange on stdio", toml: "[upstreams.x]\ncommand = \"a\"\nauth = \"token_exchange\"\n", want: []string{"upstreams.x.auth", "only for HTTP"}},
		{name: "token exchange and a shared token", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nauth = \"token_exchange\"\nbearer_token_env = \"T\"\n", want: []string{"upstreams.x.bearer_token_env", `bearer_token_env and auth = "token_exchange" are exclusive`}},
		{name: "token exchange and an Authorization header", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nauth = \"token_exchange\"\nheaders = {Authorization = \"Bearer x\"}\n", want: []string{"upstreams.x.headers.Authorization", "exclusive"}},
		{name: "token exchange with a client", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nauth = \"token_exchange\"\nclient_id = \"c\"\n", want: []string{"upstreams.x.client_id", `only with auth = "oauth"`}},
		{name: "negative max_connections", toml: "[upstreams.x]\nurl = \"http://127.0.0.1:1/mcp\"\nauth = \"oauth\"\nmax_connections = -1\n", want: []string{"upstreams.x.max_connections", ">= 0"}},
		{name: "json syntax", mcpJSON: `{"mcpServers": {`, want: []string{"mcp.json"}},
		{name: "json args not a list", mcpJSON: `{"mcpServers": {"m": {"command": "a", "args": "x"}}}`, want: []string{"mcp.json", "mcpServers.m", "args"}},
		{name: "json no command", mcpJSON: `{"mcpServers": {"m": {"args": ["x"]}}}`, want: []string{"mcpServers.m.command", "one of command"}},
		{name: "json sse without url", mcpJSON: `{"mcpServers": {"m": {"command": "a", "type": "sse"}}}`, want: []string{"mcpServers.m.url", "needs a url"}},
		{name: "json http without url", mcpJSON: `{"mcpServers": {"m": {"type": "http"}}}`, want: []string{"mcpServers.m.url", "needs a url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.mcpJSON != "" {
				if err := os.WriteFile(filepath.Join(home, "mcp.json"), []byte(tt.mcpJSON), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := tryHost(t, tt.toml, home)
			if err == nil {
				t.Fatalf("config accepted; want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// A server that cannot start does not stop bub-mcp: the App comes up, the
// server's tools are absent, its state and reason are shown, and it is
// retried.
func TestBrokenUpstreamDoesNotBlockStart(t *testing.T) {
	src := everything(t, "") + "[upstreams.broken]\ncommand = \"/nonexistent/server\"\n" +
		"[upstreams.crashes]\ncommand = \"sh\"\nargs = [\"-c\", \"echo boom >&2; exit 3\"]\n"
	h := newHost(t, src, "")
	if got := h.status(t, "everything"); got.State != "ready" || got.Tools == 0 {
		t.Fatalf("everything: %+v; want ready with tools", got)
	}
	for _, name := range []string{"broken", "crashes"} {
		s := h.status(t, name)
		// Between attempts (backoff) or in the next one (starting).
		if (s.State != "backoff" && s.State != "starting") || s.Tools != 0 || s.LastError == "" {
			t.Errorf("%s: %+v; want a failed start without tools", name, s)
		}
	}
	if s := h.status(t, "broken"); !strings.Contains(s.LastError, "/nonexistent/server") {
		t.Errorf("broken: last error %q does not name the command", s.LastError)
	}
	if s := h.status(t, "crashes"); !strings.Contains(s.LastError, "boom") || !strings.Contains(s.LastError, "exit status 3") {
		t.Errorf("crashes: last error %q lacks the exit status and stderr", s.LastError)
	}
	for _, tool := range h.Registry().Names() {
		if strings.HasPrefix(tool, "broken.") || strings.HasPrefix(tool, "crashes.") {
			t.Errorf("tool %s registered for a server that never started", tool)
		}
	}
	// /healthz says so too.
	_, url := h.serve(t)
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "ok\n") || !strings.Contains(string(body), "upstream everything: ready, 1") ||
		!strings.Contains(string(body), "upstream broken: ") || !strings.Contains(string(body), "/nonexistent/server") {
		t.Errorf("/healthz:\n%s", body)
	}
	// Retried: a later attempt fails again (and is recorded again).
	first := h.status(t, "crashes")
	h.waitState(t, "crashes", "backoff", func(s upstream.Status) bool { return s.Since.After(first.Since) })
}

// $BUB_HOME/mcp.json servers are mounted like bub.toml's; bub.toml wins on
// a name both define.
func TestMCPJSONImport(t *testing.T) {
	home := t.TempDir()
	node, args := npmServer(t, "server-memory")
	doc := `{"mcpServers": {
		"memory": {"command": ` + quoteJSON(node) + `, "args": [` + quoteJSON(args[0]) + `], "env": {"MEMORY_FILE_PATH": ` + quoteJSON(filepath.Join(home, "memory.jsonl")) + `}},
		"other": {"command": "/nonexistent/from-json"}
	}}`
	if err := os.WriteFile(filepath.Join(home, "mcp.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, "[upstreams.other]\ncommand = \"/nonexistent/from-toml\"\n", home)
	mem := h.status(t, "memory")
	if mem.State != "ready" || mem.Tools == 0 || mem.Origin != filepath.Join(home, "mcp.json") {
		t.Fatalf("memory: %+v; want ready, from mcp.json", mem)
	}
	if other := h.status(t, "other"); other.Origin != "bub.toml" || !strings.Contains(other.LastError, "from-toml") {
		t.Errorf("other: %+v; want bub.toml's definition", other)
	}
	res := h.call(t.Context(), "memory.create_entities", map[string]any{"entities": []any{map[string]any{"name": "bub", "entityType": "tool", "observations": []string{"mounts servers"}}}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	res = h.call(t.Context(), "memory_read_graph", map[string]any{})
	if res.Err != nil || !strings.Contains(res.Text, "mounts servers") {
		t.Fatalf("read_graph = %q, %v; want the entity", res.Text, res.Err)
	}
}

func quoteJSON(s string) string {
	b := strings.Builder{}
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// A lazy server starts on its first call; its tools are listed before
// that from the list its last connection remembered (the very first time,
// it starts at once to learn them).
func TestLazyStart(t *testing.T) {
	home := t.TempDir()
	src := everything(t, `start = "lazy"`)
	first := newHost(t, src, home)
	if s := first.status(t, "everything"); s.State != "ready" || s.Tools == 0 {
		t.Fatalf("first start without a remembered list: %+v; want ready", s)
	}
	tools := first.status(t, "everything").Tools
	first.Close()

	h := newHost(t, src, home)
	s := h.status(t, "everything")
	if s.State != "idle" || s.PID != 0 || s.Tools != tools {
		t.Fatalf("second start: %+v; want idle, no process, %d remembered tools", s, tools)
	}
	if _, err := h.Registry().Lookup("everything_get-sum"); err != nil {
		t.Fatal(err)
	}
	if res := h.call(t.Context(), "everything.get-sum", map[string]any{"a": 1, "b": 1}); res.Err != nil || !strings.Contains(res.Text, "is 2") {
		t.Fatalf("first call: %q, %v", res.Text, res.Err)
	}
	if s := h.status(t, "everything"); s.State != "ready" || s.PID == 0 {
		t.Errorf("after the first call: %+v; want ready with a process", s)
	}
}
