package codemode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// Order is the output of the test registry's orders.get.
type Order struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

type orderIn struct {
	OrderID string `json:"order_id" jsonschema_description:"The order's id."`
}

func rawTool(t testing.TB, name string, h registry.Handler, opts ...registry.Option) *registry.Tool {
	t.Helper()
	tool, err := registry.NewRawTool(name, "Test tool "+name+".", nil, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// providerRegistry holds a small tool set next to the module's run_code
// and code_mode: two preserved tools and two code tools (one with an
// output schema).
func providerRegistry(t testing.TB) *registry.Registry {
	t.Helper()
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("orders.get", "Look up an order by id.",
		func(ctx context.Context, tc *registry.ToolContext, in orderIn) (Order, error) {
			return Order{ID: in.OrderID, Status: "shipped"}, nil
		}))
	echo := func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return args, nil
	}
	reg.MustRegister(rawTool(t, "web.fetch", echo))
	reg.MustRegister(rawTool(t, "fs.read", echo, registry.WithPreserve()))
	reg.MustRegister(rawTool(t, "bash", echo, registry.WithPreserve()))
	return reg
}

func names(ts []*registry.Tool) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestSplit(t *testing.T) {
	needPython(t)
	all := []string{"bash", "fs.read", "orders.get", "web.fetch"}
	tests := []struct {
		name       string
		codeMode   bool
		allow      []string
		python     string
		wantDirect []string
		wantCode   []string
	}{
		{name: "off", wantDirect: all, wantCode: []string{}},
		{name: "on", codeMode: true, wantDirect: []string{"bash", "fs.read", "run_code"}, wantCode: []string{"orders.get", "web.fetch"}},
		{name: "run_code out of scope", codeMode: true, allow: []string{"bash", "fs.*", "orders.*", "web.*"}, wantDirect: all, wantCode: []string{}},
		{name: "no code tools in scope", codeMode: true, allow: []string{"bash", "fs.*", "run_code"}, wantDirect: []string{"bash", "fs.read"}, wantCode: []string{}},
		{name: "only code tools and run_code", codeMode: true, allow: []string{"orders.get", "run_code"}, wantDirect: []string{"run_code"}, wantCode: []string{"orders.get"}},
		{name: "python missing", codeMode: true, python: "no-such-python-3", wantDirect: all, wantCode: []string{}},
		{name: "python missing, off", python: "no-such-python-3", wantDirect: all, wantCode: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			profile := fmt.Sprintf("[profiles.default]\ncode_mode = %v\n", tt.codeMode)
			if tt.allow != nil {
				quoted := make([]string, len(tt.allow))
				for i, g := range tt.allow {
					quoted[i] = strconv.Quote(g)
				}
				profile += "tools = [" + strings.Join(quoted, ", ") + "]\n"
			}
			o := appOptions{home: home, reg: providerRegistry(t), profiles: profile, modules: codeModeOnly}
			if tt.python != "" {
				o.codemode = fmt.Sprintf("python = %q", tt.python)
			}
			a, _ := newApp(t, o)
			_, v := resolve(t, a, "default")
			if diff := cmp.Diff(tt.wantDirect, names(v.Tools)); diff != "" {
				t.Errorf("direct tools (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCode, names(v.CodeTools)); diff != "" {
				t.Errorf("code tools (-want +got):\n%s", diff)
			}
			if _, ok := v.Lookup("code_mode"); ok {
				t.Error("the code_mode command is callable through the View")
			}
			for _, ct := range v.CodeTools {
				if _, ok := v.Lookup(ct.ModelName()); ok {
					t.Errorf("code tool %s is also directly callable", ct.Name)
				}
				if _, ok := v.LookupCode(ct.ModelName()); !ok {
					t.Errorf("LookupCode(%q) misses", ct.ModelName())
				}
			}
			active := len(tt.wantCode) > 0
			if got := strings.Contains(v.Instructions, "<code_mode>"); got != active {
				t.Errorf("instructions mention code mode = %v; want %v:\n%s", got, active, v.Instructions)
			}
			if got := len(v.Files) == 1; got != active {
				t.Errorf("View files %v; want a stub: %v", v.Files, active)
			}
			if !active {
				if _, err := os.Stat(filepath.Join(home, "codemode")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a stub was written without code mode: %v", err)
				}
			}
		})
	}
}

func TestSplitStubAndPrompt(t *testing.T) {
	needPython(t)
	reg := providerRegistry(t)
	home, ws := t.TempDir(), t.TempDir()
	a, _ := newApp(t, appOptions{home: home, ws: ws, reg: reg, modules: codeModeOnly})
	conn, v := resolve(t, a, "default")
	content, err := codemode.Stub(v.CodeTools)
	if err != nil {
		t.Fatal(err)
	}
	path := codemode.StubPath(home, ws, conn.SessionKey, content)
	if diff := cmp.Diff(map[string]string{path: content}, v.Files); diff != "" {
		t.Errorf("View files (-want +got):\n%s", diff)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("stub not written: %v", err)
	}
	if diff := cmp.Diff(content, string(got)); diff != "" {
		t.Errorf("stub file (-want +got):\n%s", diff)
	}
	for _, want := range []string{
		"class OrdersGetResult(TypedDict):",
		"async def orders_get(*, order_id: str) -> OrdersGetResult:",
		"async def web_fetch(",
	} {
		if !strings.Contains(content, want) {
			t.Errorf("stub lacks %q:\n%s", want, content)
		}
	}
	for _, not := range []string{"def bash", "def fs_read", "def run_code", "def code_mode"} {
		if strings.Contains(content, not) {
			t.Errorf("stub declares %q, which code cannot call", not)
		}
	}

	prompt := codemode.Prompt(path)
	if v.Instructions != prompt {
		t.Errorf("Instructions = %q; want %q", v.Instructions, prompt)
	}
	rc, ok := v.Lookup("run_code")
	if !ok {
		t.Fatal("run_code not in the View")
	}
	orig, _ := a.Registry().Lookup("run_code")
	if want := orig.Description + "\n\n" + prompt; rc.Description != want {
		t.Errorf("View's run_code description = %q; want %q", rc.Description, want)
	}
	if strings.Contains(orig.Description, "<code_mode>") {
		t.Error("the registered run_code was modified")
	}

	// Another session: another directory.
	other := &providers.Connection{Transport: "test", Profile: "default", SessionKey: "s2"}
	if err := a.Resolve(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if v2, err := a.View(context.Background(), other); err != nil || v2.Instructions == prompt || !strings.Contains(v2.Instructions, filepath.Join(home, "codemode")) {
		t.Errorf("other session: Instructions = %q, %v", v2.Instructions, err)
	}
	// ViewStub finds the same file.
	c, p, ok, err := codemode.ViewStub(home, conn, v)
	if err != nil || !ok || c != content || p != path {
		t.Errorf("ViewStub = %q, %v, %v; want %q, true, nil", p, ok, err, path)
	}

	// Same tool set, same session, after a restart: same path, file
	// untouched.
	if err := os.WriteFile(path, []byte("marker"), 0o600); err != nil {
		t.Fatal(err)
	}
	a2, _ := newApp(t, appOptions{home: home, ws: ws, reg: reg, modules: codeModeOnly})
	if _, v2 := resolve(t, a2, "default"); v2.Instructions != prompt {
		t.Errorf("after a restart: Instructions = %q; want %q", v2.Instructions, prompt)
	}
	if got, _ := os.ReadFile(path); string(got) != "marker" {
		t.Error("the stub was rewritten")
	}
}

// TestViewWritesNothing checks that building a View is pure: the stub
// is only written when the App hands the View out.
func TestViewWritesNothing(t *testing.T) {
	needPython(t)
	home := t.TempDir()
	a, m := newApp(t, appOptions{home: home, reg: providerRegistry(t), modules: codeModeOnly})
	conn := &providers.Connection{Transport: "test", Profile: "default"}
	if err := a.Resolve(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	chain := providers.NewChain(a.Registry(), &providers.ChainOptions{CodeMode: m.Split})
	v, err := chain.Build(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Files) != 1 || len(v.CodeTools) == 0 {
		t.Fatalf("built View: files %v, code tools %v; want one stub", v.Files, names(v.CodeTools))
	}
	if _, err := os.Stat(filepath.Join(home, "codemode")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("building a View wrote under $BUB_HOME/codemode: %v", err)
	}
	handed, err := a.View(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v.Files, handed.Files); diff != "" {
		t.Errorf("App.View files differ from the built View's (-built +handed):\n%s", diff)
	}
	for path, content := range handed.Files {
		if got, err := os.ReadFile(path); err != nil || string(got) != content {
			t.Errorf("stub %s after App.View = %d bytes, %v; want the stub", path, len(got), err)
		}
	}
}

func TestWarnsOnceWithoutPython(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	a, _ := newApp(t, appOptions{reg: providerRegistry(t), codemode: `python = "no-such-python-3"`, logger: log})
	for _, s := range []string{"a", "b", "c"} {
		conn := &providers.Connection{Transport: "test", Profile: "default", SessionKey: s}
		if err := a.Resolve(context.Background(), conn); err != nil {
			t.Fatal(err)
		}
		v, err := a.View(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := v.Lookup("run_code"); ok {
			t.Errorf("session %s: run_code offered without Python", s)
		}
	}
	out := buf.String()
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Errorf("%d warnings; want 1:\n%s", n, out)
	}
	for _, want := range []string{"codemode.python.missing", "no-such-python-3", "[codemode] python"} {
		if !strings.Contains(out, want) {
			t.Errorf("warning lacks %q:\n%s", want, out)
		}
	}
}

// settings are a Module's [codemode] settings.
type settings struct {
	python         string
	timeout, calls int
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name, table string
		want        settings // after Provision
		wantErr     string
	}{
		{name: "defaults", want: settings{"python3", 600, 1000}},
		{name: "zero means default", table: "max_timeout_seconds = 0\nmax_calls = 0",
			want: settings{"python3", 600, 1000}},
		{name: "set", table: "python = \"no-such-python-3\"\nmax_timeout_seconds = 30\nmax_calls = 7",
			want: settings{"no-such-python-3", 30, 7}},
		{name: "negative timeout", table: "max_timeout_seconds = -1", wantErr: "config: t.toml:3: codemode.max_timeout_seconds: must be >= 0"},
		{name: "negative calls", table: "max_calls = -1", wantErr: "config: t.toml:3: codemode.max_calls: must be >= 0"},
		{name: "unknown key", table: "max_call = 5", wantErr: "config: t.toml:3: codemode.max_call: unknown key"},
		{name: "wrong type", table: "max_calls = \"5\"", wantErr: "codemode.max_calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("t.toml", "\n[codemode]\n"+tt.table+"\n", func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{"codemode"},
				Home: t.TempDir(), Workspace: t.TempDir(), Logger: discard(), Getenv: func(string) string { return "" }})
			if tt.wantErr != "" {
				if err == nil {
					a.Close()
					t.Fatalf("app.New succeeded; want error %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("app.New error = %q; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			mod, _ := a.Module("codemode")
			m := mod.(*codemode.Module)
			if got := (settings{m.Python, m.MaxTimeoutSeconds, m.MaxCalls}); got != tt.want {
				t.Errorf("settings = %+v; want %+v", got, tt.want)
			}
		})
	}
}
