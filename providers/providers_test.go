package providers

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
	codeMode := func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, []*registry.Tool, string, error) {
		order = append(order, "code")
		if !conn.CodeMode {
			var direct []*registry.Tool
			for _, t := range tools {
				if t.Name != "run_code" {
					direct = append(direct, t)
				}
			}
			return direct, nil, "", nil
		}
		var direct, code []*registry.Tool
		for _, t := range tools {
			if t.CodeUse() {
				code = append(code, t)
			} else {
				direct = append(direct, t)
			}
		}
		return direct, code, "<code_mode>x</code_mode>", nil
	}
	c := NewChain(testRegistry(t), &ChainOptions{Providers: []Provider{first, nil, second}, CodeMode: codeMode})

	v, err := c.View(context.Background(), &Connection{Profile: "p", CodeMode: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"first", "second", "code"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"bash", "bash.output", "fs.read", "fs.write", "run_code"}, names(v.Tools)); diff != "" {
		t.Errorf("direct (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tape.info", "tape.search"}, names(v.CodeTools)); diff != "" {
		t.Errorf("code (-want +got):\n%s", diff)
	}
	if v.Instructions != "first prompt\n\n<code_mode>x</code_mode>" {
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
