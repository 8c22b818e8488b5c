package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
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

// probe is a test module: it records its lifecycle, decodes [probe], and
// contributes a tool that reports what its ToolContext holds.
type probe struct {
	Greeting string `toml:"greeting"`
	Fail     string `toml:"fail"` // "provision" or "validate" makes that stage fail

	events *[]string
}

var (
	probeMu     sync.Mutex
	probeEvents = map[string]*[]string{} // by greeting: tests run in parallel
)

func (probe) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "test_probe", Config: "probe", New: func() app.Module { return new(probe) }}
}

func (p *probe) record(ev string) {
	probeMu.Lock()
	defer probeMu.Unlock()
	if p.events == nil {
		p.events = probeEvents[p.Greeting]
		if p.events == nil {
			p.events = new([]string)
			probeEvents[p.Greeting] = p.events
		}
	}
	*p.events = append(*p.events, ev)
}

func (p *probe) Provision(ctx context.Context, a *app.App) error {
	p.record("provision")
	greeting := p.Greeting
	if err := a.RegisterTool(registry.MustNewTool("probe.whoami", "Report the call's context.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return strings.Join([]string{greeting, tc.SessionKey(), tc.Session.ID(), tc.Env.Workspace(), tc.Conn.Transport}, " "), nil
	})); err != nil {
		return err
	}
	if p.Fail == "provision" {
		return errors.New("provision failed on purpose")
	}
	return nil
}

func (p *probe) Validate() error {
	p.record("validate")
	if p.Fail == "validate" {
		return errors.New("validate failed on purpose")
	}
	return nil
}

func (p *probe) Cleanup() error {
	p.record("cleanup")
	return nil
}

func init() { app.RegisterModule(probe{}) }

func events(greeting string) []string {
	probeMu.Lock()
	defer probeMu.Unlock()
	if e := probeEvents[greeting]; e != nil {
		return append([]string(nil), *e...)
	}
	return nil
}

// big returns n characters; registered outside any module, as a plugin's
// init() would.
func testRegistry() *registry.Registry {
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("big", "Return n characters.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		N int `json:"n"`
	}) (string, error) {
		return strings.Repeat("x", in.N), nil
	}))
	return reg
}

func newApp(t *testing.T, src string) (*app.App, string) {
	t.Helper()
	cfg, err := config.Parse("test.toml", src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: testRegistry(), Modules: []string{"test_probe"}, Home: home, Workspace: t.TempDir(),
		Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, home
}

func TestResolve(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	a, _ := newApp(t, "[probe]\ngreeting = \"resolve\"\n[profiles.p]\nworkspace = \""+ws+"\"\nsession = \"team\"\ncode_mode = true\n[profiles.q]\n")
	tests := []struct {
		profile string
		want    providers.Connection
		wantErr bool
	}{
		{"p", providers.Connection{Profile: "p", SessionKey: "team", Workspace: ws, CodeMode: true}, false},
		{"", providers.Connection{Profile: "default", SessionKey: "mcp:default"}, false},
		{"nope", providers.Connection{}, true},
	}
	for _, tt := range tests {
		conn := &providers.Connection{Profile: tt.profile}
		err := a.Resolve(t.Context(), conn)
		if (err != nil) != tt.wantErr {
			t.Fatalf("Resolve(%q) err = %v", tt.profile, err)
		}
		if err != nil {
			continue
		}
		if tt.want.Workspace == "" {
			tt.want.Workspace = conn.Workspace // the App's default workspace
		}
		if diff := cmp.Diff(tt.want, *conn); diff != "" {
			t.Errorf("Resolve(%q) (-want +got):\n%s", tt.profile, diff)
		}
	}
	// The session's own switch wins over the profile default, and survives.
	conn := &providers.Connection{Profile: "p"}
	a.Resolve(t.Context(), conn)
	sess, _ := a.Session(conn)
	if err := sess.SetCodeMode(false); err != nil {
		t.Fatal(err)
	}
	conn = &providers.Connection{Profile: "p"}
	a.Resolve(t.Context(), conn)
	if conn.CodeMode {
		t.Error("session setting did not override the profile's code_mode")
	}
}

func TestCallModes(t *testing.T) {
	t.Parallel()
	a, _ := newApp(t, "[probe]\ngreeting = \"modes\"\n[profiles.default]\ndeny = [\"big\"]\n")
	ctx := t.Context()
	conn := &providers.Connection{Transport: "cli", Principal: "alice", ClientName: "test", ClientVersion: "1"}
	if err := a.Resolve(ctx, conn); err != nil {
		t.Fatal(err)
	}
	res := a.Call(ctx, conn, app.Request{Tool: "probe_whoami"})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if want := "modes mcp:default mcp:default " + conn.Workspace + " cli"; res.Text != want {
		t.Errorf("whoami = %q; want %q", res.Text, want)
	}
	// A tool outside the View cannot be called directly, only as a command.
	if res := a.Call(ctx, conn, app.Request{Tool: "big", Args: json.RawMessage(`{"n":3}`)}); res.Err == nil || res.Err.Kind != registry.KindNotFound {
		t.Errorf("direct call of a denied tool = %+v; want not_found", res)
	}
	if res := a.Call(ctx, conn, app.Request{Tool: "big", Args: json.RawMessage(`{"n":"3"}`), Mode: app.Command}); res.Err != nil || res.Text != "xxx" {
		t.Errorf("command (lax) = %q, %v; want xxx", res.Text, res.Err)
	}
	// Nested calls reach only code tools, and there are none without code mode.
	if res := a.Call(ctx, conn, app.Request{Tool: "probe.whoami", Mode: app.Nested}); res.Err == nil || res.Err.Kind != registry.KindNotFound {
		t.Errorf("nested call outside code mode = %+v; want not_found", res)
	}
	a.Call(ctx, conn, app.Request{Tool: "probe.whoami", NoAudit: true})
	// The calls went to the audit log (see audit_test.go), not the tape.
	sess, _ := a.Session(conn)
	if n := len(sess.Tape().Entries()); n != 0 {
		t.Errorf("calls added %d entries to the tape; want none", n)
	}
	e1, _ := a.Environment(ctx, conn)
	e2, _ := a.Environment(ctx, conn)
	if e1 != e2 {
		t.Error("environment not reused within a session")
	}
}

// TestTwoAppsAreIndependent runs two Apps with different configurations in
// one process: each module instance has its own configuration, tools and
// lifecycle.
func TestTwoAppsAreIndependent(t *testing.T) {
	t.Parallel()
	a1, _ := newApp(t, "[probe]\ngreeting = \"first\"\n")
	a2, _ := newApp(t, "[probe]\ngreeting = \"second\"\n")
	for _, tt := range []struct {
		a    *app.App
		want string
	}{{a1, "first"}, {a2, "second"}} {
		conn := &providers.Connection{Transport: "cli"}
		if err := tt.a.Resolve(t.Context(), conn); err != nil {
			t.Fatal(err)
		}
		res := tt.a.Call(t.Context(), conn, app.Request{Tool: "probe.whoami"})
		if got, _, _ := strings.Cut(res.Text, " "); got != tt.want || res.Err != nil {
			t.Errorf("whoami = %q, %v; want greeting %q", res.Text, res.Err, tt.want)
		}
	}
	if err := a1.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"provision", "validate", "cleanup"}, events("first")); diff != "" {
		t.Errorf("first App's module lifecycle (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"provision", "validate"}, events("second")); diff != "" {
		t.Errorf("second App's module lifecycle (-want +got):\n%s", diff)
	}
	if a1.Registry() == a2.Registry() {
		t.Error("the Apps share a registry")
	}
}

func TestNewFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, wantErr string
		wantEvents         []string
	}{
		{"provision fails", "[probe]\ngreeting = \"p-fail\"\nfail = \"provision\"\n", "app: module test_probe: provision failed on purpose", []string{"provision", "cleanup"}},
		{"validate fails", "[probe]\ngreeting = \"v-fail\"\nfail = \"validate\"\n", "app: module test_probe: validate failed on purpose", []string{"provision", "validate", "cleanup"}},
		{"unknown module key", "[probe]\ngreeting = \"k-fail\"\ngretting = 1\n", "config: test.toml:3: probe.gretting: unknown key (see bub.toml.example)", []string{"provision", "validate", "cleanup"}},
		{"unknown table", "[probe]\ngreeting = \"t-fail\"\n\n[nosuch]\n", "config: test.toml:4: nosuch: unknown table (see bub.toml.example)", []string{"provision", "validate", "cleanup"}},
		{"bad module value", "[probe]\ngreeting = 3\n", "config: test.toml:2: probe.greeting: want a string in quotes, not a whole number", nil},
		{"unknown environment", "[probe]\ngreeting = \"e-fail\"\n[profiles.default]\nenvironment = \"moon\"\n", `config: test.toml:4: profiles.default.environment: unknown environment "moon" (registered: ` + strings.Join(environment.Names(), ", ") + `; forgotten import?)`, []string{"provision", "validate", "cleanup"}},
		{"negative concurrency", "[tools]\nmax_concurrency = -1\n", "config: test.toml:2: tools.max_concurrency: must be >= 0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse("test.toml", tt.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{"test_probe"}, Home: t.TempDir(), Workspace: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				a.Close()
				t.Fatal("New succeeded")
			}
			if err.Error() != tt.wantErr {
				t.Errorf("New error = %q; want %q", err, tt.wantErr)
			}
			if tt.wantEvents != nil {
				_, after, _ := strings.Cut(tt.src, "greeting = \"")
				g, _, _ := strings.Cut(after, "\"")
				if diff := cmp.Diff(tt.wantEvents, events(g)); diff != "" {
					t.Errorf("lifecycle (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestUnknownModule(t *testing.T) {
	t.Parallel()
	_, err := app.New(t.Context(), &app.Options{Config: config.Default(), Modules: []string{"nope"}, Home: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.HasPrefix(err.Error(), `app: unknown module "nope" (registered: [`) || !strings.HasSuffix(err.Error(), "forgotten import?)") {
		t.Errorf("New with an unknown module = %v", err)
	}
}

func TestRegisterModulePanics(t *testing.T) {
	t.Parallel()
	for _, m := range []app.Module{badModule{"Bad ID"}, badModule{""}, badModule{"test_probe"}, noNew{}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterModule(%v) did not panic", m.BubModule().ID)
				}
			}()
			app.RegisterModule(m)
		}()
	}
	ids := []string{}
	for _, m := range app.Modules() {
		ids = append(ids, m.ID)
	}
	if !strings.Contains(strings.Join(ids, ","), "test_probe") {
		t.Errorf("Modules() = %v; want test_probe in it", ids)
	}
}

type badModule struct{ id string }

func (b badModule) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: b.id, New: func() app.Module { return b }}
}

type noNew struct{}

func (noNew) BubModule() app.ModuleInfo { return app.ModuleInfo{ID: "test.nonew"} }

// TestForgetReleasesTemporarySessions checks that a finished temporary
// session leaves nothing behind: its Environment is closed and a new
// Session call starts from an empty tape.
func TestForgetReleasesTemporarySessions(t *testing.T) {
	t.Parallel()
	a, home := newApp(t, "[probe]\ngreeting = \"forget\"\n")
	ctx := t.Context()
	conn := &providers.Connection{Transport: "agent", SessionKey: "temp/abc"}
	if err := a.Resolve(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if res := a.Call(ctx, conn, app.Request{Tool: "probe.whoami"}); res.Err != nil {
		t.Fatal(res.Err)
	}
	env, _ := a.Environment(ctx, conn)
	sess, _ := a.Session(conn)
	if err := sess.Tape().Handoff("mark", "something to forget"); err != nil {
		t.Fatal(err)
	}
	a.Forget(conn)
	if _, err := env.Spawn(ctx, environment.Spec{Command: "true"}); !errors.Is(err, environment.ErrClosed) {
		t.Errorf("forgotten environment still open: Spawn = %v", err)
	}
	sess2, _ := a.Session(conn)
	if sess2 == sess || len(sess2.Tape().Entries()) != 0 {
		t.Errorf("temporary session kept after Forget: %d entries", len(sess2.Tape().Entries()))
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "tapes")); len(entries) != 0 {
		t.Errorf("temporary session touched storage: %v", entries)
	}
}

// TestProvisionOnlyContributions checks that a contribution after New is
// refused loudly instead of being lost.
func TestProvisionOnlyContributions(t *testing.T) {
	t.Parallel()
	a, _ := newApp(t, "[probe]\ngreeting = \"late\"\n")
	defer func() {
		if recover() == nil {
			t.Error("RegisterTool after New did not panic")
		}
	}()
	a.RegisterTool(registry.MustNewTool("late", "Too late.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) { return "", nil }))
}

// TestCommandsBypassHooks: a policy hook meant for the model (here one
// that denies every call) does not bind a human's command, as in Bub;
// direct calls still go through it.
func TestCommandsBypassHooks(t *testing.T) {
	t.Parallel()
	reg := testRegistry()
	reg.AddHooks(registry.Hooks{Name: "policy", Before: func(ctx context.Context, call *registry.ToolCall) registry.Decision {
		return registry.Deny("no tools for models")
	}})
	cfg, err := config.Parse("test.toml", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: reg, Modules: []string{}, Home: t.TempDir(), Workspace: t.TempDir(),
		Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	conn := &providers.Connection{Transport: "cli"}
	if err := a.Resolve(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode    app.Mode
		wantErr string
	}{
		{app.Direct, "[tool] no tools for models"},
		{app.Command, ""},
	} {
		res := a.Call(t.Context(), conn, app.Request{Tool: "big", Args: json.RawMessage(`{"n":2}`), Mode: tc.mode})
		got := ""
		if res.Err != nil {
			got = res.Err.Error()
		}
		if got != tc.wantErr {
			t.Errorf("%v call: error %q; want %q", tc.mode, got, tc.wantErr)
		}
	}
}
