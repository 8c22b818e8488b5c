package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	_ "github.com/bubbuild/bub-mcp/builtin"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sandbox"
	"github.com/google/go-cmp/cmp"
)

func newApp(t *testing.T, src string) (*app.App, error) {
	t.Helper()
	cfg, err := config.Parse("t.toml", src, func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{"builtin"},
		Home: t.TempDir(), Workspace: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { a.Close() })
	return a, nil
}

func bash(t *testing.T, a *app.App, profile, cmd string) registry.Result {
	t.Helper()
	conn := &providers.Connection{Transport: "test", Profile: profile}
	if err := a.Resolve(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"command": cmd})
	return a.Call(t.Context(), conn, app.Request{Tool: "bash", Args: b, Mode: app.Direct})
}

// TestProfilePolicy: a profile's sandbox keys reach its sandbox; another
// profile's limits do not. tight uses the nested table, limited the
// spelling from before modules were namespaced: both configure the same.
func TestProfilePolicy(t *testing.T) {
	testenv.MustHaveBwrap(t)
	a, err := newApp(t, `
[profiles.tight.environment]
kind = "sandbox"
memory = "256MiB"
file_size = 4096
processes = 30
cpu_seconds = 100

[profiles.loose]
environment = "sandbox"

[profiles.limited]
environment = "sandbox"
[profiles.limited.sandbox]
memory = "256MiB"
`)
	if err != nil {
		t.Fatal(err)
	}
	alloc := `python3 -c 'b = bytearray(1 << 30); print("allocated")'`
	if res := bash(t, a, "tight", alloc); res.Err == nil || !strings.Contains(res.Err.Message, "MemoryError") {
		t.Errorf("1 GiB in tight = %+v; want a MemoryError", res)
	}
	if res := bash(t, a, "limited", alloc); res.Err == nil || !strings.Contains(res.Err.Message, "MemoryError") {
		t.Errorf("1 GiB in limited (old spelling) = %+v; want a MemoryError", res)
	}
	if res := bash(t, a, "loose", alloc); res.Err != nil || res.Text != "allocated" {
		t.Errorf("1 GiB in loose = %+v; want allocated", res)
	}
	if res := bash(t, a, "tight", "head -c 8192 /dev/zero > big; wc -c < big"); !strings.Contains(res.Text, "File size limit exceeded") || !slices.Contains(strings.Split(res.Text, "\n"), "4096") {
		// stdout (wc) and stderr (bash's report) are separate pipes: either may come first.
		t.Errorf("8 KiB file under file_size = 4096 = %q, %v; want it cut at 4096", res.Text, res.Err)
	}
	if res := bash(t, a, "tight", "ulimit -t; ulimit -u"); res.Err != nil || !strings.HasPrefix(res.Text, "100") {
		t.Errorf("cpu_seconds inside = %+v; want 100", res)
	}
	conn := &providers.Connection{Transport: "test", Profile: "tight"}
	if err := a.Resolve(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	env, err := a.Environment(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := env.(*environment.SandboxEnvironment); !ok {
		t.Errorf("environment of tight = %T; want *environment.SandboxEnvironment", env)
	}
}

func TestBadConfig(t *testing.T) {
	testenv.MustHaveBwrap(t)
	tests := []struct{ name, src, want string }{
		{"network", "[profiles.p]\nenvironment = \"sandbox\"\n[profiles.p.sandbox]\nnetwork = \"wifi\"\n", `t.toml:4: profiles.p.sandbox.network: must be "none" or "host"`},
		{"memory unit", "[profiles.p]\nenvironment = \"sandbox\"\n[profiles.p.sandbox]\nmemory = \"12 parsecs\"\n", "t.toml:4"},
		{"memory too small", "[profiles.p]\nenvironment = \"sandbox\"\n[profiles.p.sandbox]\nmemory = 1000\n", "profiles.p.sandbox.memory: must be at least 16MiB"},
		{"negative processes", "[profiles.p]\nenvironment = \"sandbox\"\n[profiles.p.sandbox]\nprocesses = -1\n", "profiles.p.sandbox.processes: must be >= 0"},
		{"unknown key", "[profiles.p]\nenvironment = \"sandbox\"\n[profiles.p.sandbox]\nmemroy = \"1GiB\"\n", "t.toml:4: profiles.p.sandbox.memroy: unknown key"},
		{"sandbox table of a local profile", "[profiles.p.sandbox]\nmemory = \"1GiB\"\n", `profiles.p.sandbox: only read with environment = "sandbox"; write [profiles.p.environment] kind = "sandbox"`},
		{"missing bwrap", "[sandbox]\nbwrap = \"/nonexistent/bwrap\"\n[profiles.p]\nenvironment = \"sandbox\"\n", `t.toml:2: sandbox.bwrap: profile "p" runs in the sandbox, which needs bubblewrap`},
		{"nested: network", "[profiles.p.environment]\nkind = \"sandbox\"\nnetwork = \"wifi\"\n", `t.toml:3: profiles.p.environment.network: must be "none" or "host"`},
		{"nested: unknown key", "[profiles.p.environment]\nkind = \"sandbox\"\nmemroy = \"1GiB\"\n", "t.toml:3: profiles.p.environment.memroy: unknown key"},
		{"nested: key of another kind", "[profiles.p.environment]\nkind = \"local\"\nmemory = \"1GiB\"\n", "t.toml:3: profiles.p.environment.memory: unknown key"},
		{"nested: unknown kind", "[profiles.p.environment]\nkind = \"docker\"\n", `t.toml:2: profiles.p.environment.kind: unknown environment "docker" (registered: local, sandbox; forgotten import?)`},
		{"nested: missing bwrap", "[profiles.p.environment]\nkind = \"sandbox\"\nbwrap = \"/nonexistent/bwrap\"\n", `t.toml:3: profiles.p.environment.bwrap: profile "p" runs in the sandbox, which needs bubblewrap`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newApp(t, tt.src)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("config %q: %v; want an error containing %q", tt.src, err, tt.want)
			}
		})
	}
}

// TestPythonAskedPerApp: each App remembers where Python lives for its
// own sessions' sandboxes; a second App in the same process asks again
// (here after a virtualenv was put first on PATH) instead of reusing the
// first App's answer.
func TestPythonAskedPerApp(t *testing.T) {
	testenv.MustHaveBwrap(t)
	testenv.MustHaveExec(t, "python3", "apt-get install python3")
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command("python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		testenv.Missing(t, fmt.Sprintf("python3 cannot make a virtualenv (apt-get install python3-venv): %v: %s", err, out))
	}
	python := func(a *app.App, session string) string {
		conn := &providers.Connection{Transport: "test", Profile: "p", SessionKey: session}
		if err := a.Resolve(t.Context(), conn); err != nil {
			t.Fatal(err)
		}
		env, err := a.Environment(t.Context(), conn)
		if err != nil {
			t.Fatal(err)
		}
		return environment.PythonOf(env)
	}
	src := "[profiles.p]\nenvironment = \"sandbox\"\n"
	first, err := newApp(t, src)
	if err != nil {
		t.Fatal(err)
	}
	before := python(first, "one")
	t.Setenv("PATH", filepath.Join(venv, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	second, err := newApp(t, src)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{"first app, new session": python(first, "two"), "second app": python(second, "one")}
	want := map[string]string{"first app, new session": before, "second app": filepath.Join(venv, "bin", "python3")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("interpreters (-want +got):\n%s", diff)
	}
}

// An upstream server's [upstreams.<name>.sandbox] overrides [sandbox]
// key by key, as a profile's table does: the keys it sets win, the
// others keep [sandbox]'s values.
func TestUpstreamPolicyDefaults(t *testing.T) {
	testenv.MustHaveBwrap(t)
	dir := t.TempDir()
	cfg, err := config.Parse("t.toml", fmt.Sprintf(`
[sandbox]
memory = "256MiB"
network = "host"
processes = 40

[upstreams.x]
command = "srv"
environment = "sandbox"
[upstreams.x.sandbox]
read_only = [%q]
processes = 20
`, dir), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	own := &sandbox.Config{ReadOnly: []string{dir}, Processes: 20}
	m, err := sandbox.Policy(cfg.NewModuleRef(environment.SandboxName, "upstreams", "x", "sandbox"), own)
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Config{Memory: 256 << 20, Network: "host", Processes: 20, ReadOnly: []string{dir}}
	if diff := cmp.Diff(want, m.Config); diff != "" {
		t.Errorf("upstream's sandbox keys (-want +got):\n%s", diff)
	}
}
