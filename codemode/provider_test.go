package codemode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/codemode"
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

// providerRegistry holds a small tool set: two preserved tools, two code
// tools (one with an output schema), a command and run_code.
func providerRegistry(t testing.TB) *registry.Registry {
	t.Helper()
	reg := registry.New()
	reg.MustRegister(codemode.RunCodeTool())
	reg.MustRegister(codemode.CodeModeTool())
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

func noPython(string) (string, error) { return "", errors.New("exec: not found") }

func TestProviderSplit(t *testing.T) {
	reg := providerRegistry(t)
	all := []string{"bash", "fs.read", "orders.get", "web.fetch"}
	tests := []struct {
		name       string
		codeMode   bool
		allow      []string
		lookPath   func(string) (string, error)
		wantDirect []string
		wantCode   []string
	}{
		{name: "off", wantDirect: all, wantCode: []string{}},
		{name: "on", codeMode: true, wantDirect: []string{"bash", "fs.read", "run_code"}, wantCode: []string{"orders.get", "web.fetch"}},
		{name: "run_code out of scope", codeMode: true, allow: []string{"bash", "fs.*", "orders.*", "web.*"}, wantDirect: all, wantCode: []string{}},
		{name: "no code tools in scope", codeMode: true, allow: []string{"bash", "fs.*", "run_code"}, wantDirect: []string{"bash", "fs.read"}, wantCode: []string{}},
		{name: "only code tools and run_code", codeMode: true, allow: []string{"orders.get", "run_code"}, wantDirect: []string{"run_code"}, wantCode: []string{"orders.get"}},
		{name: "python missing", codeMode: true, lookPath: noPython, wantDirect: all, wantCode: []string{}},
		{name: "python missing, off", lookPath: noPython, wantDirect: all, wantCode: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			scope := providers.ScopeProvider(func(*providers.Connection) providers.Scope { return providers.Scope{Allow: tt.allow} })
			cm := codemode.Provider(&codemode.Options{Home: home, LookPath: tt.lookPath, Logger: discard()})
			chain := providers.NewChain(reg, &providers.ChainOptions{Providers: []providers.Provider{scope}, CodeMode: cm})
			conn := &providers.Connection{Transport: "test", Profile: "default", SessionKey: "s", Workspace: "/ws", CodeMode: tt.codeMode}
			v, err := chain.View(context.Background(), conn)
			if err != nil {
				t.Fatal(err)
			}
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
			if !active {
				if _, err := os.Stat(filepath.Join(home, "codemode")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a stub was written without code mode: %v", err)
				}
			}
		})
	}
}

func TestProviderStubAndPrompt(t *testing.T) {
	reg := providerRegistry(t)
	home := t.TempDir()
	build := func(session string) *providers.View {
		t.Helper()
		chain := providers.NewChain(reg, &providers.ChainOptions{CodeMode: codemode.Provider(&codemode.Options{Home: home})})
		v, err := chain.Build(context.Background(), &providers.Connection{SessionKey: session, Workspace: "/ws", CodeMode: true})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := build("s1")
	content, err := codemode.Stub(v.CodeTools)
	if err != nil {
		t.Fatal(err)
	}
	path := codemode.StubPath(home, "/ws", "s1", content)
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
	orig, _ := reg.Lookup("run_code")
	if want := orig.Description + "\n\n" + prompt; rc.Description != want {
		t.Errorf("View's run_code description = %q; want %q", rc.Description, want)
	}
	if strings.Contains(orig.Description, "<code_mode>") {
		t.Error("the registered run_code was modified")
	}

	// Same tool set, same session: same path, file untouched.
	st, _ := os.Stat(path)
	if v2 := build("s1"); v2.Instructions != prompt {
		t.Errorf("second build: Instructions = %q; want %q", v2.Instructions, prompt)
	}
	if st2, _ := os.Stat(path); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("the stub was rewritten")
	}
	// Another session: another directory.
	if v3 := build("s2"); v3.Instructions == prompt || !strings.Contains(v3.Instructions, filepath.Join(home, "codemode")) {
		t.Errorf("other session: Instructions = %q", v3.Instructions)
	}
	// ViewStub finds the same file.
	c, p, ok, err := codemode.ViewStub(home, &providers.Connection{SessionKey: "s1", Workspace: "/ws"}, v)
	if err != nil || !ok || c != content || p != path {
		t.Errorf("ViewStub = %q, %v, %v; want %q, true, nil", p, ok, err, path)
	}
}

func TestProviderWarnsOnceWithoutPython(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	cm := codemode.Provider(&codemode.Options{Home: t.TempDir(), Python: "no-such-python-3", Logger: log})
	reg := providerRegistry(t)
	chain := providers.NewChain(reg, &providers.ChainOptions{CodeMode: cm})
	for _, s := range []string{"a", "b", "c"} {
		v, err := chain.View(context.Background(), &providers.Connection{SessionKey: s, CodeMode: true})
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
	for _, want := range []string{"no-such-python-3", "[codemode] python"} {
		if !strings.Contains(out, want) {
			t.Errorf("warning lacks %q:\n%s", want, out)
		}
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
