package app_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// labelled is a third party's configurable Environment: the module
// environment.app_test_labelled, whose keys neither config nor
// environment knows. Each use (profile) gets its own instance.
type labelled struct {
	Label string `toml:"label"`
	Depth int    `toml:"depth"`

	at string // the table it was configured in, from ProvisionUse
}

// labelledLog records what the instances did, by label.
var labelledLog struct {
	sync.Mutex
	events []string
}

func logLabelled(e string) {
	labelledLog.Lock()
	labelledLog.events = append(labelledLog.events, e)
	labelledLog.Unlock()
}

func (*labelled) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "environment.app_test_labelled", Config: "app_test_labelled", New: func() app.Module { return new(labelled) }}
}

func (m *labelled) ProvisionUse(ctx context.Context, a *app.App, at *config.ModuleRef) error {
	if m.Depth < 0 {
		return at.Fail("must be >= 0", "depth")
	}
	m.at = strings.Join(at.Table, ".")
	return nil
}

func (m *labelled) Cleanup() error {
	logLabelled("cleanup " + m.Label)
	return nil
}

func (m *labelled) NewEnvironment(ctx context.Context, o environment.Options) (environment.Environment, error) {
	local, err := environment.NewLocal(&environment.LocalOptions{Workspace: o.Workspace})
	if err != nil {
		return nil, err
	}
	return labelledEnv{local, m}, nil
}

type labelledEnv struct {
	*environment.LocalEnvironment
	m *labelled
}

func init() { app.RegisterModule(new(labelled)) }

func newAppErr(t *testing.T, src string) (*app.App, error) {
	t.Helper()
	cfg, err := config.Parse("test.toml", src, func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	return app.New(t.Context(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{}, Home: t.TempDir(), Workspace: t.TempDir(),
		Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
}

// TestEnvironmentModulePerProfile: each profile's [profiles.x.environment]
// table configures its own instance of the module it names, over the
// module's shared table; the App cleans every instance up when it closes.
func TestEnvironmentModulePerProfile(t *testing.T) {
	labelledLog.Lock()
	labelledLog.events = nil
	labelledLog.Unlock()
	a, err := newAppErr(t, `
[app_test_labelled]
depth = 7

[profiles.a.environment]
kind = "app_test_labelled"
label = "first"

[profiles.b.environment]
kind = "app_test_labelled"
label = "second"
depth = 2
`)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Label, At string
		Depth     int
	}
	var gots []got
	for _, p := range []string{"a", "b"} {
		conn := &providers.Connection{Transport: "test", Profile: p}
		if err := a.Resolve(t.Context(), conn); err != nil {
			t.Fatal(err)
		}
		env, err := a.Environment(t.Context(), conn)
		if err != nil {
			t.Fatal(err)
		}
		le, ok := env.(labelledEnv)
		if !ok {
			t.Fatalf("environment of %s = %T; want the module's", p, env)
		}
		gots = append(gots, got{le.m.Label, le.m.at, le.m.Depth})
	}
	want := []got{{"first", "profiles.a.environment", 7}, {"second", "profiles.b.environment", 2}}
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	labelledLog.Lock()
	events := append([]string(nil), labelledLog.events...)
	labelledLog.Unlock()
	if diff := cmp.Diff([]string{"cleanup second", "cleanup first"}, events); diff != "" {
		t.Errorf("cleanups (-want +got):\n%s", diff)
	}
}

// TestEnvironmentModuleErrors: the module's checks and unknown keys name
// file, line and key.
func TestEnvironmentModuleErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"module's own check", "[profiles.p.environment]\nkind = \"app_test_labelled\"\ndepth = -1\n", "config: test.toml:3: profiles.p.environment.depth: must be >= 0"},
		{"unknown key", "[profiles.p.environment]\nkind = \"app_test_labelled\"\nlable = \"x\"\n", "config: test.toml:3: profiles.p.environment.lable: unknown key"},
		{"wrong type", "[profiles.p.environment]\nkind = \"app_test_labelled\"\ndepth = \"deep\"\n", "test.toml:3"},
		{"unknown kind", "[profiles.p.environment]\nkind = \"app_test_nope\"\n", `config: test.toml:2: profiles.p.environment.kind: unknown environment "app_test_nope"`},
		{"unknown key in the shared table", "[app_test_labelled]\nlable = \"x\"\n", "config: test.toml:2: app_test_labelled.lable: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := newAppErr(t, tt.src)
			if a != nil {
				a.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v; want an error containing %q", err, tt.want)
			}
		})
	}
	a, err := newAppErr(t, "[app_test_labelled]\ndepth = 1\n")
	if err != nil {
		t.Fatalf("a shared table no profile uses = %v; want it accepted", err)
	}
	a.Close()
}
