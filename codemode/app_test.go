package codemode_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	_ "github.com/bubbuild/bub-mcp/builtin"
	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	_ "github.com/bubbuild/bub-mcp/spill"
)

// testProfiles are "default" (code mode on), "direct" (off),
// "restricted" (run_code out of scope) and "confined" (on, paths confined
// to the workspace).
const testProfiles = `
[profiles.default]
code_mode = true

[profiles.direct]

[profiles.restricted]
code_mode = true
tools = ["orders.*", "fs.*"]

[profiles.confined]
code_mode = true
confine = true
`

type appOptions struct {
	home     string
	ws       string
	reg      *registry.Registry
	profiles string   // replaces testProfiles when set
	codemode string   // the [codemode] table's body
	modules  []string // nil means codemode and spill
	logger   *slog.Logger
	env      string // the default profile's environment; "" means local
}

// newApp builds an App with the codemode and spill modules over a temp
// $BUB_HOME, the test profiles and o.reg's tools (testRegistry when nil),
// and returns it with its codemode module.
func newApp(t testing.TB, o appOptions) (*app.App, *codemode.Module) {
	t.Helper()
	if o.home == "" {
		o.home = t.TempDir()
	}
	if o.ws == "" {
		o.ws = t.TempDir()
	}
	if o.reg == nil {
		o.reg = testRegistry(t, nil)
	}
	if o.modules == nil {
		o.modules = []string{"codemode", "spill"}
	}
	if o.logger == nil {
		o.logger = discard()
	}
	src := testProfiles
	if o.profiles != "" {
		src = o.profiles
	}
	if o.codemode != "" {
		src += "\n[codemode]\n" + o.codemode + "\n"
	}
	if o.env != "" {
		src = strings.Replace(src, "[profiles.default]\n", "[profiles.default]\nenvironment = \""+o.env+"\"\n", 1)
	}
	cfg, err := config.Parse("t.toml", src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: o.reg, Modules: o.modules,
		Home: o.home, Workspace: o.ws, Logger: o.logger, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	m, ok := a.Module("codemode")
	if !ok {
		t.Fatal("codemode module not loaded")
	}
	return a, m.(*codemode.Module)
}

// resolve resolves a connection of profile and hands out its View.
func resolve(t testing.TB, a *app.App, profile string) (*providers.Connection, *providers.View) {
	t.Helper()
	conn := &providers.Connection{Transport: "test", Profile: profile}
	if err := a.Resolve(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	v, err := a.View(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return conn, v
}

func args(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// command calls a tool as a human would (`bub-mcp call`).
func command(a *app.App, conn *providers.Connection, tool string, args json.RawMessage) registry.Result {
	return a.Call(context.Background(), conn, app.Request{Tool: tool, Args: args, Mode: app.Command})
}

// codeModeOnly loads no module but codemode, so Views hold only the test
// registry's tools and the module's.
var codeModeOnly = []string{"codemode"}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// envKinds are the environments the code-mode tests run on.
var envKinds = []string{"local", "sandbox"}

// eachEnv runs fn as a subtest per environment; the sandbox one needs
// bubblewrap.
func eachEnv(t *testing.T, fn func(t *testing.T, env string)) {
	for _, kind := range envKinds {
		t.Run(kind, func(t *testing.T) {
			if kind == "sandbox" {
				testenv.MustHaveBwrap(t)
			}
			fn(t, kind)
		})
	}
}
