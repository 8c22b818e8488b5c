package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/builtin"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

const testSystem = "You are a test agent."

// gauge counts calls in flight and remembers the most at once.
type gauge struct {
	cur, max atomic.Int64
}

func (g *gauge) enter() {
	n := g.cur.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.cur.Add(-1) }

type slowIn struct {
	ID string `json:"id"`
}

type fixture struct {
	t     *testing.T
	ws    string
	home  string
	cfg   *config.Config
	app   *app.App
	mod   *agent.Module
	agent *agent.Agent
	conn  *providers.Connection
	slow  gauge
	// slowDelay is how long each slow call takes; default 50ms.
	slowDelay time.Duration
	// rendezvous, when set, makes "pair" calls wait until two are in
	// flight together (proof that a batch runs in parallel).
	pairMu   sync.Mutex
	pairSeen int
	pairAll  chan struct{}
	// sessions are the sessions the whoami tool was called in.
	sessMu   sync.Mutex
	sessions []registry.Session
}

type fixtureOpts struct {
	provider    string // "openai" (default) or "anthropic"
	url         string
	concurrency int
	maxSteps    int
	profileTOML string
	// whoami adds a tool that answers its session's id and remembers the
	// session (f.sessions).
	whoami bool
	// state adds a tool "state" that answers its ToolContext.State's
	// request_id.
	state bool
	// modules are loaded next to the agent module.
	modules []string
}

// newFixture builds an App with the agent module and, on a test registry,
// a few builtin tools and the test tools, and configures the module's
// Agent to talk to the fake model server at o.url.
func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, ws: t.TempDir(), home: t.TempDir(), pairAll: make(chan struct{})}
	t.Setenv("HOME", t.TempDir()) // no global skills
	src := o.profileTOML
	if o.concurrency != 0 {
		src = fmt.Sprintf("[tools]\nmax_concurrency = %d\n", o.concurrency) + src
	}
	cfg, err := config.Parse("test.toml", src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	f.cfg = cfg
	reg := registry.New()
	bm := &builtin.Module{}
	t.Cleanup(func() { bm.Cleanup() })
	want := map[string]bool{"fs.read": true, "fs.write": true, "tape.info": true, "tape.search": true, "tape.handoff": true, "bash": true}
	for _, tl := range bm.Tools() {
		if want[tl.Name] {
			reg.MustRegister(tl)
		}
	}
	reg.MustRegister(registry.MustNewTool("slow", "Wait a little and return the id.", func(ctx context.Context, tc *registry.ToolContext, in slowIn) (string, error) {
		f.slow.enter()
		defer f.slow.leave()
		d := f.slowDelay
		if d == 0 {
			d = 50 * time.Millisecond
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return "done " + in.ID, nil
	}))
	reg.MustRegister(registry.MustNewTool("pair", "Return once two pair calls run at the same time.", func(ctx context.Context, tc *registry.ToolContext, in slowIn) (string, error) {
		f.pairMu.Lock()
		f.pairSeen++
		if f.pairSeen == 2 {
			close(f.pairAll)
		}
		f.pairMu.Unlock()
		select {
		case <-f.pairAll:
			return "paired " + in.ID, nil
		case <-time.After(5 * time.Second):
			return "", registry.NewError(registry.KindTool, "the other call never ran alongside", nil)
		}
	}))
	if o.whoami {
		reg.MustRegister(registry.MustNewTool("whoami", "Return the session's id.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
			f.sessMu.Lock()
			f.sessions = append(f.sessions, tc.Session)
			f.sessMu.Unlock()
			return tc.SessionKey(), nil
		}))
	}
	if o.state {
		reg.MustRegister(registry.MustNewTool("state", "Return the request id.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
			return fmt.Sprintf("request_id=%v", tc.State["request_id"]), nil
		}))
	}
	provider := o.provider
	if provider == "" {
		provider = "openai"
	}
	base := o.url + "/v1"
	if provider == "anthropic" {
		base = o.url
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: reg, Modules: append([]string{"agent"}, o.modules...), Home: f.home, Workspace: f.ws,
		Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	f.app = a
	if f.mod, err = agent.FromApp(a); err != nil {
		t.Fatal(err)
	}
	settings := agent.Settings{Model: provider + ":fake-model", APIKey: "test-key", APIBase: base, MaxSteps: o.maxSteps}
	f.agent = f.mod.Configure(&agent.Options{Settings: settings, SystemPrompt: testSystem, Backoff: 5 * time.Millisecond})
	f.conn = &providers.Connection{Transport: "agent", Profile: "default", SessionKey: "test:session"}
	if err := a.Resolve(t.Context(), f.conn); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) system() string { return testSystem + "\n\nWorkspace: " + f.ws }

func (f *fixture) tape() *sessions.Tape {
	f.t.Helper()
	sess, err := f.app.Session(f.conn)
	if err != nil {
		f.t.Fatal(err)
	}
	return sess.Tape()
}

func (f *fixture) path(name string) string { return filepath.Join(f.ws, name) }

// recorder keeps a turn's events.
type recorder struct {
	mu     sync.Mutex
	events []agent.Event
}

func (r *recorder) Emit(e agent.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) kinds() []agent.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []agent.EventKind
	for _, e := range r.events {
		if len(out) > 0 && out[len(out)-1] == e.Kind && (e.Kind == agent.EventText || e.Kind == agent.EventReasoning) {
			continue
		}
		out = append(out, e.Kind)
	}
	return out
}

func (r *recorder) count(k agent.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// entryKinds summarises a tape: kinds, with event names.
func entryKinds(es []sessions.Entry) []string {
	var out []string
	for _, e := range es {
		k := e.Kind
		if e.Kind == sessions.KindEvent {
			name, _ := e.Payload["name"].(string)
			k = "event:" + name
		}
		if e.Kind == sessions.KindAnchor {
			name, _ := e.Payload["name"].(string)
			k = "anchor:" + name
		}
		out = append(out, k)
	}
	return out
}
