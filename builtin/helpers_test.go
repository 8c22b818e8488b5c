package builtin

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/proctest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// testTimeout bounds every wait, so a bug fails a test instead of hanging
// the binary.
const testTimeout = 15 * time.Second

// fixture is a real environment on a temporary workspace and a real
// session, with an executor over a registry holding one Module's tools.
type fixture struct {
	t    testing.TB
	ws   string
	env  environment.Environment
	sess *sessions.Session
	mod  *Module
	exec *registry.Executor
	peer registry.Peer
}

// envKinds are the environments the tool tests run on.
var envKinds = []string{"local", environment.SandboxName}

// eachEnv runs fn as a subtest per environment kind, on a fixture with a
// zero Module; the sandbox one needs bubblewrap (testenv.MustHaveBwrap).
func eachEnv(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, kind := range envKinds {
		t.Run(kind, func(t *testing.T) {
			if kind == "local" {
				fn(t, newFixture(t, nil))
				return
			}
			testenv.MustHaveBwrap(t)
			ws := t.TempDir()
			env, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: ws})
			if err != nil {
				t.Fatalf("NewSandbox: %v", err)
			}
			fn(t, newEnvFixture(t, &Module{}, env))
		})
	}
}

// newFixture is newModuleFixture with a zero Module (the defaults).
func newFixture(t *testing.T, opts *environment.LocalOptions) *fixture {
	t.Helper()
	return newModuleFixture(t, &Module{}, opts)
}

// newModuleFixture runs m's tools; m is cleaned up with the test.
func newModuleFixture(t *testing.T, m *Module, opts *environment.LocalOptions) *fixture {
	t.Helper()
	var o environment.LocalOptions
	if opts != nil {
		o = *opts
	}
	if o.Workspace == "" {
		o.Workspace = t.TempDir()
	}
	env, err := environment.NewLocal(&o)
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	return newEnvFixture(t, m, env)
}

// newEnvFixture runs m's tools in env; both are cleaned up with the test.
func newEnvFixture(t testing.TB, m *Module, env environment.Environment) *fixture {
	t.Helper()
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Errorf("env.Close: %v", err)
		}
	})
	store, err := sessions.Open(t.TempDir(), &sessions.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("sessions.Open: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	sess, err := store.Session(env.Workspace(), "test")
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Cleanup(); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	return &fixture{t: t, ws: env.Workspace(), env: env, sess: sess, mod: m, exec: newExec(t, m)}
}

// newExec returns an executor over a new registry holding m's tools.
func newExec(tb testing.TB, m *Module) *registry.Executor {
	tb.Helper()
	reg := registry.New()
	for _, tl := range m.Tools() {
		if err := reg.Register(tl); err != nil {
			tb.Fatalf("Register(%s): %v", tl.Name, err)
		}
	}
	return registry.NewExecutor(reg, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
}

// call runs a tool with the fixture's environment and session.
func (f *fixture) call(tool string, args any) registry.Result {
	f.t.Helper()
	return f.callCtx(f.t.Context(), tool, args)
}

func (f *fixture) callCtx(ctx context.Context, tool string, args any) registry.Result {
	f.t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		f.t.Fatalf("marshal args: %v", err)
	}
	tc := &registry.ToolContext{Session: f.sess, Env: f.env, Peer: f.peer, Conn: &registry.Connection{SessionKey: "test"}}
	return f.exec.Call(ctx, registry.Call{Tool: tool, Args: raw, Context: tc})
}

// ok runs a call that must succeed and returns its rendered text.
func (f *fixture) ok(tool string, args any) string {
	f.t.Helper()
	res := f.call(tool, args)
	if res.Err != nil {
		f.t.Fatalf("%s(%v) failed: %v %v", tool, args, res.Err, res.Err.Details)
	}
	return res.Text
}

// fails runs a call that must fail and returns its error.
func (f *fixture) fails(tool string, args any) *registry.Error {
	f.t.Helper()
	res := f.call(tool, args)
	if res.Err == nil {
		f.t.Fatalf("%s(%v) = %q; want an error", tool, args, res.Text)
	}
	return res.Err
}

func (f *fixture) write(name, content string) string {
	f.t.Helper()
	p := filepath.Join(f.ws, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) read(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.ws, name))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// shellID extracts the id from a background start or timeout message.
func shellID(t *testing.T, text string) string {
	t.Helper()
	i := strings.Index(text, "bash-")
	if i < 0 || len(text) < i+13 {
		t.Fatalf("no shell id in %q", text)
	}
	return text[i : i+13]
}

// pollOutput reads a shell's output until it contains want lines (after
// the header), returning them.
func (f *fixture) pollOutput(id string, lines int) []string {
	f.t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		res := f.call("bash.output", map[string]any{"shell_id": id})
		if res.Err != nil {
			f.t.Fatalf("bash.output: %v", res.Err)
		}
		out := res.Value.(BashOutputResult).Output
		if got := strings.Fields(out); len(got) >= lines {
			return got
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("shell %s: output %q has fewer than %d lines after %v", id, out, lines, testTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a pid: %q", s)
	}
	return n
}

// processGone reports whether pid no longer runs: absent from the process
// table, or a zombie waiting for a parent (PID 1 of a container may never
// waitGone polls the process table until every pid died.
func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	proctest.WaitGone(t, testTimeout, pids...)
}

// recordingPeer records progress notifications.
type recordingPeer struct {
	mu       sync.Mutex
	messages []string
	last     float64
}

func (p *recordingPeer) Progress(ctx context.Context, progress, total float64, message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.messages = append(p.messages, message)
	p.last = progress
}

func (p *recordingPeer) Log(context.Context, slog.Level, string, any) {}
func (p *recordingPeer) Sample(context.Context, registry.SampleRequest) (*registry.SampleResult, error) {
	return nil, registry.ErrNoPeer
}
func (p *recordingPeer) Elicit(context.Context, registry.ElicitRequest) (*registry.ElicitResult, error) {
	return nil, registry.ErrNoPeer
}

var _ registry.Peer = (*recordingPeer)(nil)

// count returns how many shells env holds.
func (t *shellTable) count(env environment.Environment) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.envs[env])
}
