package toolsearch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/toolsearch"
	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// npmServer returns the command line of a pinned npm MCP server run by
// the pinned Node; it fails (CI=true) or skips the test when either is
// missing.
func npmServer(t testing.TB, pkg string, args ...string) (string, []string) {
	t.Helper()
	return testenv.NPMServer(t, pkg, args...)
}

// stdioTable is an [upstreams.<name>] table for a stdio server.
func stdioTable(name, command string, args []string, extra string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return fmt.Sprintf("[upstreams.%s]\ncommand = %q\nargs = [%s]\n%s\n", name, command, strings.Join(q, ", "), extra)
}

// reference is the three reference servers as upstreams everything,
// memory and files, each with extra in its table.
func reference(t testing.TB, home, extra string) string {
	evCmd, evArgs := npmServer(t, "server-everything", "stdio")
	memCmd, memArgs := npmServer(t, "server-memory")
	root := filepath.Join(home, "files")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	fsCmd, fsArgs := npmServer(t, "server-filesystem", root)
	return stdioTable("everything", evCmd, evArgs, extra) +
		stdioTable("memory", memCmd, memArgs, extra+"\nenv = { MEMORY_FILE_PATH = \""+home+"/memory.jsonl\" }") +
		stdioTable("files", fsCmd, fsArgs, extra)
}

// newApp is an App with the upstream and toolsearch modules over src,
// with its upstreams started.
func newApp(t testing.TB, src string, reg *registry.Registry) *app.App {
	t.Helper()
	home := t.TempDir()
	cfg, err := config.Parse(filepath.Join(home, "bub.toml"), src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if reg == nil {
		reg = registry.New()
	}
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: reg, Modules: []string{"toolsearch", "upstream"},
		Home: home, Workspace: home, Getenv: os.Getenv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if m, ok := upstream.FromApp(a); ok {
		if err := m.Wait(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Status() {
			if s.State != upstream.StateReady {
				t.Fatalf("upstream %s: %s (%s)", s.Name, s.State, s.LastError)
			}
		}
	}
	return a
}

// connect resolves a connection of profile with its own session.
func connect(t testing.TB, a *app.App, profile, session string) *providers.Connection {
	t.Helper()
	conn := &providers.Connection{Transport: "test", Profile: profile, SessionKey: session}
	if err := a.Resolve(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	return conn
}

// search calls tool_search as a model does.
func search(t testing.TB, a *app.App, conn *providers.Connection, args string) (toolsearch.Result, *registry.Error) {
	t.Helper()
	res := a.Call(t.Context(), conn, app.Request{Tool: "tool_search", Args: json.RawMessage(args)})
	if res.Err != nil {
		return toolsearch.Result{}, res.Err
	}
	return res.Value.(toolsearch.Result), nil
}

func names(r toolsearch.Result) []string {
	var out []string
	for _, d := range r.Tools {
		out = append(out, d.Name)
	}
	return out
}

const profiles = `
[profiles.nofiles]
deny = ["files.*"]
`

// TestSearchReferenceServers ranks the tools of the three reference
// servers, all deferred, for what a model would ask; each query runs in a
// session of its own.
func TestSearchReferenceServers(t *testing.T) {
	home := t.TempDir()
	a := newApp(t, reference(t, home, "defer = true")+profiles, nil)
	tests := []struct {
		query string
		first string
	}{
		{"read a file", "files_read_file"},
		{"read the text of a file", "files_read_text_file"},
		{"create entities in the knowledge graph", "memory_create_entities"},
		{"add two numbers", "everything_get-sum"},
		{"echo a message back", "everything_echo"},
		{"move or rename a file", "files_move_file"},
		{"search nodes of the graph", "memory_search_nodes"},
		{"show the directory tree", "files_directory_tree"},
		{"which directories may I access", "files_list_allowed_directories"},
		{"image", "everything_get-tiny-image"},
	}
	for i, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			conn := connect(t, a, "default", fmt.Sprintf("rank-%d", i))
			args, _ := json.Marshal(map[string]any{"query": tt.query})
			got, err := search(t, a, conn, string(args))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Tools) == 0 || got.Tools[0].Name != tt.first {
				t.Errorf("first %q; want %q; ranked %v", names(got), tt.first, got.Tools)
			}
		})
	}
}

// TestSearchRespectsTheView: a profile that denies the filesystem server
// never gets one of its tools, whatever it asks, and cannot load one.
func TestSearchRespectsTheView(t *testing.T) {
	home := t.TempDir()
	a := newApp(t, reference(t, home, "defer = true")+profiles, nil)
	for _, q := range []string{"read a file", "file", "files", "write edit move directory tree", "list allowed directories"} {
		for _, profile := range []string{"default", "nofiles"} {
			conn := connect(t, a, profile, "view-"+profile)
			args, _ := json.Marshal(map[string]any{"query": q, "limit": 20})
			got, err := search(t, a, conn, string(args))
			if err != nil {
				t.Fatal(err)
			}
			files := slices.ContainsFunc(names(got), func(n string) bool { return strings.HasPrefix(n, "files_") })
			if want := profile == "default"; files != want {
				t.Errorf("%s: %q gave %v; files_* expected: %v", profile, q, names(got), want)
			}
			for _, n := range got.Loaded {
				if strings.HasPrefix(n, "files.") && profile == "nofiles" {
					t.Errorf("nofiles loaded %s", n)
				}
			}
		}
	}
	conn := connect(t, a, "nofiles", "view-nofiles")
	if res := a.Call(t.Context(), conn, app.Request{Tool: "files_read_file", Args: json.RawMessage(`{"path":"x"}`)}); res.Err == nil {
		t.Error("nofiles called files_read_file")
	}
}

// TestSearchLoadsDeferredTools: the deferred tools a search returns are
// listed for that session from then on (and only for it), and callable.
func TestSearchLoadsDeferredTools(t *testing.T) {
	home := t.TempDir()
	a := newApp(t, reference(t, home, "defer = true"), nil)
	conn := connect(t, a, "default", "loader")
	other := connect(t, a, "default", "other")
	listed := func(c *providers.Connection) []string {
		t.Helper()
		v, err := a.View(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range v.Tools {
			out = append(out, tool.ModelName())
		}
		return out
	}
	if diff := cmp.Diff([]string{"tool_describe", "tool_search"}, listed(conn)); diff != "" {
		t.Fatalf("listed before the search (-want +got):\n%s", diff)
	}
	got, err := search(t, a, conn, `{"query":"create entities in the knowledge graph","limit":2}`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"memory_create_entities", "memory_create_relations"}, names(got)); diff != "" {
		t.Errorf("found (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"memory.create_entities", "memory.create_relations"}, got.Loaded); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}
	if d := got.Tools[0]; !strings.Contains(string(d.InputSchema), `"entities"`) || d.Description == "" || d.RunCode {
		t.Errorf("definition not ready to call: %+v", d)
	}
	if diff := cmp.Diff([]string{"memory_create_entities", "memory_create_relations", "tool_describe", "tool_search"}, listed(conn)); diff != "" {
		t.Errorf("listed after the search (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tool_describe", "tool_search"}, listed(other)); diff != "" {
		t.Errorf("another session's list changed (-want +got):\n%s", diff)
	}
	res := a.Call(t.Context(), conn, app.Request{Tool: "memory_create_entities",
		Args: json.RawMessage(`{"entities":[{"name":"Ada","entityType":"person","observations":["wrote the first program"]}]}`)})
	if res.Err != nil || !strings.Contains(res.Text, "Ada") {
		t.Fatalf("calling the loaded tool: %v %s", res.Err, res.Text)
	}
	// A second search of loaded tools loads nothing more.
	if got, err := search(t, a, conn, `{"query":"create entities","limit":1}`); err != nil || len(got.Loaded) != 0 {
		t.Errorf("second search: %v loaded %v", err, got.Loaded)
	}
}

// TestSearchLimit bounds the answer: 5 by default, at most 20, and bad
// input is an error naming the argument.
func TestSearchLimit(t *testing.T) {
	reg := registry.New()
	for i := range 30 {
		tool := registry.MustNewTool(fmt.Sprintf("orders.get%d", i), fmt.Sprintf("Look up order number %d.", i),
			func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) { return "ok", nil })
		tool.Deferred = true
		reg.MustRegister(tool)
	}
	a := newApp(t, "", reg)
	conn := connect(t, a, "default", "limits")
	tests := []struct {
		args    string
		n       int
		wantErr string
	}{
		{`{"query":"order"}`, 5, ""},
		{`{"query":"order","limit":0}`, 5, ""},
		{`{"query":"order","limit":1}`, 1, ""},
		{`{"query":"order","limit":20}`, 20, ""},
		{`{"query":"look up an order","limit":12}`, 12, ""},
		{`{"query":"nothing matches this"}`, 0, ""},
		{`{"query":"order","limit":21}`, 0, "limit"},
		{`{"query":"order","limit":-1}`, 0, "limit"},
		{`{"query":""}`, 0, "query"},
		{`{"query":"` + strings.Repeat("order ", 200) + `"}`, 0, "query"},
	}
	for _, tt := range tests {
		got, err := search(t, a, conn, tt.args)
		switch {
		case tt.wantErr != "":
			// The schema refuses what it can (the validator's details name
			// the argument), the handler the rest.
			if err == nil || !strings.Contains(err.Error()+fmt.Sprint(err.Details), tt.wantErr) {
				t.Errorf("%.60s: error %v; want one naming %q", tt.args, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%.60s: %v", tt.args, err)
		case len(got.Tools) != tt.n:
			t.Errorf("%.60s: %d tools; want %d", tt.args, len(got.Tools), tt.n)
		}
	}
}

// TestSearchMode: "auto" lists tool_search only to Views with a deferred
// tool, "on" always, "off" never; anything else is an error naming the key.
func TestSearchMode(t *testing.T) {
	tool := func(deferred bool) *registry.Registry {
		reg := registry.New()
		tl := registry.MustNewTool("orders.get", "Look up an order.",
			func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) { return "ok", nil })
		tl.Deferred = deferred
		reg.MustRegister(tl)
		return reg
	}
	tests := []struct {
		name     string
		src      string
		deferred bool
		want     bool
	}{
		{"auto without deferred tools", "", false, false},
		{"auto with a deferred tool", "", true, true},
		{"explicit auto", "[tools]\nsearch = \"auto\"\n", true, true},
		{"auto, deferred tool out of scope", "[profiles.default]\ndeny = [\"orders.*\"]\n", true, false},
		{"on", "[tools]\nsearch = \"on\"\n", false, true},
		{"off", "[tools]\nsearch = \"off\"\n", true, false},
		{"on, denied by the profile", "[tools]\nsearch = \"on\"\n[profiles.default]\ndeny = [\"tool.search\"]\n", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newApp(t, tt.src, tool(tt.deferred))
			v, err := a.View(t.Context(), connect(t, a, "default", "mode"))
			if err != nil {
				t.Fatal(err)
			}
			if _, got := v.Lookup("tool_search"); got != tt.want {
				t.Errorf("tool_search in the View: %v; want %v", got, tt.want)
			}
		})
	}
	cfg, err := config.Parse("bub.toml", "[tools]\nsearch = \"always\"\n", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.New(t.Context(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{"toolsearch"}, Home: t.TempDir(), Workspace: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "search") || !strings.Contains(err.Error(), "always") {
		t.Errorf("search = \"always\": %v; want an error naming tools.search", err)
	}
}

// TestToolsListBytes measures tools/list (the result as mcpserver
// marshals it) and the instructions with the three reference servers
// mounted: listed directly, deferred with tool_describe alone (search =
// "off"), and deferred with tool_search too.
func TestToolsListBytes(t *testing.T) {
	measure := func(tools, upstreams string) (list, instr int, listed []string) {
		t.Helper()
		home := t.TempDir()
		a := newApp(t, tools+reference(t, home, upstreams), nil)
		v, err := a.View(t.Context(), connect(t, a, "default", "measure"))
		if err != nil {
			t.Fatal(err)
		}
		res := mcp.ListToolsResult{Tools: []mcp.Tool{}}
		for _, tool := range v.Tools {
			res.Tools = append(res.Tools, mcpserver.MCPTool(tool))
			listed = append(listed, tool.ModelName())
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		return len(b), len(v.Instructions), listed
	}
	direct, directInstr, all := measure("", "")
	deferred, deferredInstr, describeOnly := measure("[tools]\nsearch = \"off\"\n", "defer = true")
	searched, searchedInstr, withSearch := measure("", "defer = true")
	t.Logf("%d tools listed: tools/list %d B, instructions %d B", len(all), direct, directInstr)
	t.Logf("deferred, %v listed: tools/list %d B, instructions %d B", describeOnly, deferred, deferredInstr)
	t.Logf("deferred, %v listed: tools/list %d B, instructions %d B", withSearch, searched, searchedInstr)
	if diff := cmp.Diff([]string{"tool_describe"}, describeOnly); diff != "" {
		t.Errorf("deferred without search lists (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tool_describe", "tool_search"}, withSearch); diff != "" {
		t.Errorf("deferred with search lists (-want +got):\n%s", diff)
	}
	if slices.Contains(all, "tool_search") || searched >= direct/10 {
		t.Errorf("direct lists %v in %d B; deferred with search %d B", all, direct, searched)
	}
}
