package providers

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/modules"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

func tool(t testing.TB, name string, opts ...registry.Option) *registry.Tool {
	t.Helper()
	tl, err := registry.NewRawTool(name, "desc of "+name, nil, func(context.Context, *registry.ToolContext, json.RawMessage) (any, error) { return name, nil }, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func testRegistry(t testing.TB) *registry.Registry {
	r := registry.New()
	for _, tl := range []*registry.Tool{
		tool(t, "bash", registry.WithPreserve()), tool(t, "bash.output", registry.WithPreserve()),
		tool(t, "fs.read", registry.WithPreserve()), tool(t, "fs.write", registry.WithPreserve()),
		tool(t, "tape.info"), tool(t, "tape.search"), tool(t, "web.fetch"),
		tool(t, "run_code", registry.WithPreserve()), tool(t, "code_mode", registry.WithCommandOnly()),
	} {
		r.MustRegister(tl)
	}
	return r
}

func names(ts []*registry.Tool) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestScope(t *testing.T) {
	tests := []struct {
		name  string
		scope Scope
		want  []string
	}{
		{"all", Scope{}, []string{"bash", "bash.output", "fs.read", "fs.write", "run_code", "tape.info", "tape.search", "web.fetch"}},
		{"allow globs", Scope{Allow: []string{"fs.*", "tape.info"}}, []string{"fs.read", "fs.write", "tape.info"}},
		{"model-name pattern", Scope{Allow: []string{"fs_read"}}, []string{"fs.read"}},
		{"deny wins", Scope{Allow: []string{"*"}, Deny: []string{"bash*", "web.*"}}, []string{"fs.read", "fs.write", "run_code", "tape.info", "tape.search"}},
		{"command-only never listed", Scope{Allow: []string{"code_mode", "fs.read"}}, []string{"fs.read"}},
		{"case-insensitive", Scope{Allow: []string{"FS.READ"}}, []string{"fs.read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChain(testRegistry(t), &ChainOptions{Providers: []Provider{ScopeProvider(func(*Connection) Scope { return tt.scope })}})
			v, err := c.View(context.Background(), &Connection{Profile: "p"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, names(v.Tools)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChainOrderPromptsAndCodeMode(t *testing.T) {
	var order []string
	first := func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
		order = append(order, "first")
		return tools, "first prompt", nil
	}
	second := func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
		order = append(order, "second")
		var out []*registry.Tool
		for _, t := range tools {
			if t.Name != "web.fetch" {
				out = append(out, t)
			}
		}
		return out, "", nil
	}
	third := func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
		order = append(order, "third")
		return tools, "third prompt", nil
	}
	codeMode := func(ctx context.Context, conn *Connection, tools []*registry.Tool) (Split, error) {
		order = append(order, "code")
		if !conn.CodeMode {
			var direct []*registry.Tool
			for _, t := range tools {
				if t.Name != "run_code" {
					direct = append(direct, t)
				}
			}
			return Split{Direct: direct}, nil
		}
		var split Split
		for _, t := range tools {
			if t.CodeUse() {
				split.Code = append(split.Code, t)
			} else {
				split.Direct = append(split.Direct, t)
			}
		}
		split.Prompt = "<code_mode>x</code_mode>"
		return split, nil
	}
	c := NewChain(testRegistry(t), &ChainOptions{Filters: []Provider{first, nil, second}, CodeMode: codeMode, Providers: []Provider{third}})

	v, err := c.View(context.Background(), &Connection{Profile: "p", CodeMode: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"first", "second", "code", "third"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"bash", "bash.output", "fs.read", "fs.write", "run_code"}, names(v.Tools)); diff != "" {
		t.Errorf("direct (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tape.info", "tape.search"}, names(v.CodeTools)); diff != "" {
		t.Errorf("code (-want +got):\n%s", diff)
	}
	if v.Instructions != "first prompt\n\n<code_mode>x</code_mode>\n\nthird prompt" {
		t.Errorf("instructions = %q", v.Instructions)
	}
	if _, ok := v.Lookup("tape_info"); ok {
		t.Error("code tool callable directly")
	}
	if tl, ok := v.LookupCode("tape_info"); !ok || tl.Name != "tape.info" {
		t.Error("code tool not found by model name")
	}
	if tl, ok := v.Lookup("FS_READ"); !ok || tl.Name != "fs.read" {
		t.Error("direct tool not found by model name")
	}

	// Cached: the same key gives the same View; a different setting does not.
	order = nil
	v2, _ := c.View(context.Background(), &Connection{Profile: "p", CodeMode: true})
	if v2 != v || len(order) != 0 {
		t.Error("view not cached")
	}
	off, _ := c.View(context.Background(), &Connection{Profile: "p", CodeMode: false})
	if off == v || len(off.CodeTools) != 0 {
		t.Error("code-mode switch did not change the view")
	}
	if _, ok := off.Lookup("run_code"); ok {
		t.Error("run_code visible without code mode")
	}
	c.Reset()
	order = nil
	if v3, _ := c.View(context.Background(), &Connection{Profile: "p", CodeMode: true}); v3 == v || len(order) == 0 {
		t.Error("Reset did not rebuild")
	}
}

func TestProviderError(t *testing.T) {
	bad := func(context.Context, *Connection, []*registry.Tool) ([]*registry.Tool, string, error) {
		return nil, "", errors.New("upstream down")
	}
	c := NewChain(testRegistry(t), &ChainOptions{Providers: []Provider{bad}})
	if _, err := c.View(context.Background(), &Connection{}); err == nil {
		t.Fatal("provider error swallowed")
	}
}

func TestCheckGlobs(t *testing.T) {
	for _, tt := range []struct {
		pats []string
		ok   bool
	}{{[]string{"fs.*", "bash"}, true}, {[]string{"["}, false}, {[]string{" "}, false}} {
		if err := CheckGlobs(tt.pats); (err == nil) != tt.ok {
			t.Errorf("CheckGlobs(%q) = %v; want ok=%v", tt.pats, err, tt.ok)
		}
	}
}

func FuzzMatchGlob(f *testing.F) {
	for _, s := range [][2]string{{"fs.*", "fs.read"}, {"[", "x"}, {"*", ""}, {"a\\", "a"}, {" ", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if strings.ContainsRune(name, '/') {
			t.Skip("tool names never contain '/'")
		}
		got := MatchGlob(pattern, name)
		if CheckGlobs([]string{pattern}) != nil && got {
			t.Errorf("malformed pattern %q matched %q", pattern, name)
		}
		if pattern == "*" && !got {
			t.Errorf("* did not match %q", name)
		}
	})
}

func TestRegisteredProviders(t *testing.T) {
	drop := func(name string) Provider {
		return func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
			var out []*registry.Tool
			for _, tl := range tools {
				if tl.Name != name {
					out = append(out, tl)
				}
			}
			return out, "dropped " + name, nil
		}
	}
	Register("test_drop_bash", drop("bash"))
	Register("test_drop_fs_read", drop("fs.read"))
	for _, bad := range []struct {
		name string
		p    Provider
	}{{"", drop("x")}, {"test_nil", nil}, {"Test Upper", drop("x")}, {"test.dotted", drop("x")}, {"test_drop_bash", drop("x")}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", bad.name)
				}
			}()
			Register(bad.name, bad.p)
		}()
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), `unknown provider "nope" (registered: readonly_first, test_drop_bash, test_drop_fs_read; forgotten import?)`) {
		t.Errorf("Lookup(nope) = %v", err)
	}
	// Each is the module provider.<name> of the one module registry.
	if info, err := modules.Lookup("provider.test_drop_bash"); err != nil || info.Namespace() != Namespace || info.Name() != "test_drop_bash" {
		t.Errorf("modules.Lookup(provider.test_drop_bash) = %+v, %v; want the provider's module", info, err)
	}
	// Picked in any order, they run in registration order.
	tools, prompt, err := Run(context.Background(), []string{"test_drop_fs_read", "test_drop_bash"}, &Connection{}, testRegistry(t).Tools())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"bash.output", "code_mode", "fs.write", "run_code", "tape.info", "tape.search", "web.fetch"}, names(tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if prompt != "dropped bash\n\ndropped fs.read" {
		t.Errorf("prompt = %q", prompt)
	}
}

func TestChainCacheIsBounded(t *testing.T) {
	builds := 0
	count := func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
		builds++
		return tools, "", nil
	}
	c := NewChain(testRegistry(t), &ChainOptions{Filters: []Provider{count}, MaxViews: 2})
	ctx := context.Background()
	for _, s := range []string{"a", "b", "a", "c", "d"} {
		if _, err := c.View(ctx, &Connection{SessionKey: s}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.cache); n > 2 {
		t.Errorf("cache holds %d views; want at most 2", n)
	}
	if builds != 4 { // a, b, c, d; the second a was cached
		t.Errorf("builds = %d; want 4", builds)
	}
	c.Forget("d")
	if _, ok := c.cache[keyOf(&Connection{SessionKey: "d"})]; ok {
		t.Error("Forget kept the session's view")
	}
}

func TestViewWritesFilesOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "stub.pyi")
	split := func(ctx context.Context, conn *Connection, tools []*registry.Tool) (Split, error) {
		return Split{Direct: tools, Files: map[string]string{path: "content"}}, nil
	}
	c := NewChain(testRegistry(t), &ChainOptions{CodeMode: split})
	v, err := c.View(context.Background(), &Connection{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("building the view wrote %s (stat: %v)", path, err)
	}
	if err := v.WriteFiles(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "content" {
		t.Fatalf("file = %q, %v", b, err)
	}
	os.Remove(path)
	if err := v.WriteFiles(); err != nil || fileExists(path) {
		t.Errorf("second WriteFiles wrote again (err %v)", err)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestDeferral(t *testing.T) {
	r := testRegistry(t)
	for _, name := range []string{"up.one", "up.two"} {
		tl := tool(t, name)
		tl.Deferred = true
		tl.Description = "Does " + name + ". More text.\nSecond line."
		r.MustRegister(tl)
	}
	tests := []struct {
		name                 string
		loaded               []string
		wantListed, wantDefd []string
		wantCatalog          []string
	}{
		{"none loaded", nil, []string{"bash", "bash.output", "fs.read", "fs.write", "run_code", "tape.info", "tape.search", "web.fetch"},
			[]string{"up.one", "up.two"}, []string{"\n- up_one: Does up.one.", "\n- up_two: Does up.two."}},
		{"one loaded", []string{"up.two"}, []string{"bash", "bash.output", "fs.read", "fs.write", "run_code", "tape.info", "tape.search", "up.two", "web.fetch"},
			[]string{"up.one"}, []string{"\n- up_one: Does up.one."}},
		{"all loaded", []string{"up.one", "up.two"}, []string{"bash", "bash.output", "fs.read", "fs.write", "run_code", "tape.info", "tape.search", "up.one", "up.two", "web.fetch"},
			[]string{}, nil},
	}
	t.Run("with tool search", func(t *testing.T) {
		rs := registry.New()
		for _, tl := range r.Tools() {
			rs.MustRegister(tl)
		}
		rs.MustRegister(tool(t, SearchToolName))
		c := NewChain(rs, nil)
		v, err := c.Build(context.Background(), &Connection{Profile: "p"})
		if err != nil {
			t.Fatal(err)
		}
		want := "2 more tools are available but not listed. Find them with tool_search(query=...)"
		if !strings.Contains(v.Instructions, want) || strings.Contains(v.Instructions, "- up_one") {
			t.Errorf("instructions %q; want the one line naming tool_search, not the catalog", v.Instructions)
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChain(r, &ChainOptions{Loaded: func(*Connection) []string { return tc.loaded }})
			v, err := c.Build(context.Background(), &Connection{Profile: "p"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantListed, names(v.Tools)); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDefd, names(v.Deferred)); diff != "" {
				t.Errorf("deferred (-want +got):\n%s", diff)
			}
			for _, line := range tc.wantCatalog {
				if !strings.Contains(v.Instructions, line) {
					t.Errorf("instructions %q lack %q", v.Instructions, line)
				}
			}
			if tc.wantCatalog == nil && strings.Contains(v.Instructions, "tool_describe") {
				t.Errorf("catalog without deferred tools: %q", v.Instructions)
			}
			for _, n := range []string{"up.one", "up_two"} {
				if _, ok := v.Lookup(n); !ok {
					t.Errorf("Lookup(%q) failed: deferred tools are callable by name", n)
				}
			}
		})
	}
}

func TestFirstSentence(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Echoes back the input string", "Echoes back the input string"},
		{"Read a file. Then more.", "Read a file."},
		{"Uses v1.2 of the API. Fine.", "Uses v1.2 of the API."},
		{"  First line\nsecond line.", "First line"},
		{"", ""},
	} {
		if got := FirstSentence(tc.in); got != tc.want {
			t.Errorf("FirstSentence(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// A View built while the tools changed (Reset) is served but not cached:
// the next request builds a fresh one.
func TestViewBuiltAcrossResetIsNotCached(t *testing.T) {
	builds := 0
	var c *Chain
	c = NewChain(testRegistry(t), &ChainOptions{Filters: []Provider{func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
		builds++
		if builds == 1 {
			c.Reset() // the registry changes while the first View is built
		}
		return tools, "", nil
	}}})
	conn := &Connection{Profile: "p"}
	for range 3 {
		if _, err := c.View(context.Background(), conn); err != nil {
			t.Fatal(err)
		}
	}
	if builds != 2 {
		t.Errorf("%d builds; want 2 (the first not cached, the second cached)", builds)
	}
}
