// Package upstream mounts other MCP servers ("upstreams") as Bub tools:
// each configured server gets one client connection per process (a stdio
// child spawned through its Environment, which owns the child's process
// group, cgroup and end, or a streamable HTTP client), started
// eagerly or lazily and restarted with backoff, and its tools become
// registry tools named "<server>.<tool>" that go through the same call
// path as builtins (views, hooks, spill, audit, code mode).
//
// Servers come from [upstreams.<name>] tables in bub.toml and from a
// Claude-Desktop-style $BUB_HOME/mcp.json; a bub.toml entry wins over an
// mcp.json one of the same name.
package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/lockedfile"
	"github.com/bubbuild/bub-mcp/internal/textmatch"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sandbox"
	"github.com/bubbuild/bub-mcp/sessions/pgstore/docstore"
)

func init() { app.RegisterModule(new(Module)) }

// Module is the upstream servers of one App. It decodes [upstreams.<name>]
// itself (each table is one server) and reads $BUB_HOME/mcp.json.
type Module struct {
	app     *app.App
	log     *slog.Logger
	version string
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	upsMu   sync.Mutex  // guards ups, which a reload replaces
	ups     []*upstream // sorted by name
	cache   string      // directory of remembered tool lists
	memory  memory      // gives back what large results cost
	// pinStore keeps the servers' pinned tool definitions; pins is what
	// this process knows of each server's (pin.go).
	pinStore   PinStore
	closeStore func() // the shared pin store's connections; nil for files
	pinMu      sync.Mutex
	pins       map[string]*pinState
	pinWatch   sync.Once // the pin watcher runs once a pinned server is mounted
	// hot is what hot reload (reload.go) compares the next edit with.
	hot hotState
	// notifiers tell the MCP servers of the upstreams' resources and
	// prompts (resources.go), once they start.
	notifyMu  sync.Mutex
	notifiers []mcpserver.Notifier
	// credentials are auth = "oauth" servers' token sets and the marks of
	// used login state (credentials.go); loginBase is where the HTTP
	// transport serves the sign-in (oauth.go), empty without it.
	credentials credentials
	loginMu     sync.Mutex
	loginBase   string
	loginDone   chan struct{} // closed at a sign-in (loginSignal)
}

// Version is what bub-mcp reports to upstream servers as its client
// version; the CLI sets it to its own.
var Version = "dev"

// BubModule registers the module as "upstream"; its configuration is the
// [upstreams] table, decoded in Provision.
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "upstream", New: func() app.Module { return new(Module) }}
}

// Provision reads the servers, registers their remembered tool lists and
// starts the eager ones (and the lazy ones without a remembered list) in
// the background: start-up never waits for an upstream. A server's tools
// appear when it is ready, with notifications/tools/list_changed, and a
// call of a tool whose server is still starting waits for it (at most its
// start_timeout). A server that fails is logged and retried; it never
// fails Provision — only bad configuration does.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	m.app, m.log, m.version = a, a.Logger(), Version
	servers, err := m.servers(a.Config())
	if err != nil {
		return err
	}
	// tool.describe comes with deferred tools: an upstream's, or any tool
	// registered as deferred before this module provisions.
	deferred := slices.ContainsFunc(a.Registry().Tools(), func(t *registry.Tool) bool { return t.Deferred }) ||
		slices.ContainsFunc(servers, func(s *Server) bool { return s.Defer })
	// A server (not a one-shot command) may gain upstreams by hot reload,
	// so its clients are told of tool changes even with none yet.
	serving := !a.OnDemand()
	if len(servers) == 0 && !deferred && !serving {
		return nil
	}
	// Loading a deferred tool changes what a session lists, as a server's
	// tools changing does: clients are told either way.
	a.EnableToolChanges()
	if deferred {
		if err := a.RegisterTool(m.describeTool()); err != nil {
			return err
		}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.cache = filepath.Join(a.Home(), "upstreams")
	m.pinStore = FilePinStore{Dir: m.cache}
	if dsn := a.StoreDSN(); dsn != "" {
		// Replicas and the operator's commands share the pins.
		docs, err := docstore.Open(dsn)
		if err != nil {
			return a.Config().Fail(err.Error(), "store")
		}
		m.pinStore, m.closeStore = PGPinStore{Docs: docs}, docs.Close
	}
	m.hot.init(a)
	if serving {
		a.AddFilter(m.listForCaller)
	}
	var ups []*upstream
	for _, s := range servers {
		ups = append(ups, newUpstream(s, m))
	}
	m.upsMu.Lock()
	m.ups = ups
	m.upsMu.Unlock()
	for _, u := range ups {
		m.mount(u)
	}
	return nil
}

// mount registers a new upstream's remembered tool list, starts it when
// it is eager (or lazy without a remembered list) and the App is not a
// one-shot command, and starts the pin watcher for the first pinned one.
func (m *Module) mount(u *upstream) {
	if u.cfg.pinMode() != PinOff {
		m.pinWatch.Do(func() {
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				m.watchPins(m.ctx)
			}()
		})
	}
	raws, ok := m.remembered(u.cfg)
	if ok {
		if err := u.register(raws); err != nil {
			u.setState(StateError, err)
			m.log.Error("upstream.tools.refused", "upstream", u.cfg.name, "error", err)
		}
	}
	// A one-shot command (bub-mcp call) starts a server only when one
	// of its tools is called: WaitFor or the call itself start it.
	if u.cfg.Auth == AuthOAuth {
		if !ok && !m.app.OnDemand() {
			u.listAsAnyone()
		}
		return
	}
	if u.cfg.Auth == AuthTokenExchange {
		return // listed by the first OAuth caller's view (listForCaller)
	}
	if (u.cfg.Start == StartEager || !ok) && !m.app.OnDemand() {
		u.start()
	}
}

// list is the current upstreams, sorted by name; a reload may replace
// the set, never this copy.
func (m *Module) list() []*upstream {
	m.upsMu.Lock()
	defer m.upsMu.Unlock()
	return slices.Clone(m.ups)
}

// Wait waits until every started upstream has made its first attempt
// (ready, or failed and backing off), or ctx ends; progress, when not nil,
// is told each upstream's status as its attempt ends, in that order. It is
// for commands that show the upstreams (`bub-mcp upstreams`): serving
// never waits.
func (m *Module) Wait(ctx context.Context, progress func(Status)) error {
	done := make(chan *upstream)
	n := 0
	for _, u := range m.list() {
		u.mu.Lock()
		running := u.running
		u.mu.Unlock()
		if !running {
			continue
		}
		n++
		go func() {
			select {
			case <-u.firstTry:
				select {
				case done <- u:
				case <-ctx.Done():
				}
			case <-ctx.Done():
			}
		}()
	}
	for range n {
		select {
		case u := <-done:
			if progress != nil {
				progress(u.status())
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// WaitFor waits, at most its start_timeout, for the first attempt of the
// upstream whose namespace the tool name (a runtime "<server>.<tool>" or
// model "<server>_<tool>" name) starts with, so that a tool it has not
// listed yet can be looked up; it reports whether there is such an
// upstream. A command that calls one tool by name uses it when the name is
// not registered (yet).
func (m *Module) WaitFor(ctx context.Context, tool string) bool {
	for _, u := range m.list() {
		if !strings.HasPrefix(tool, u.cfg.name+".") && !strings.HasPrefix(tool, u.cfg.name+"_") {
			continue
		}
		if u.cfg.perPrincipal() { // no shared connection to wait for
			return true
		}
		u.start()
		t := time.NewTimer(u.cfg.StartTimeout.Duration)
		defer t.Stop()
		select {
		case <-u.firstTry:
		case <-t.C:
		case <-ctx.Done():
		}
		return true
	}
	return false
}

// servers merges mcp.json's servers with bub.toml's and checks them.
func (m *Module) servers(cfg *config.Config) ([]*Server, error) {
	a := m.app
	table := map[string]*Server{}
	if err := cfg.Decode("upstreams", &table); err != nil {
		return nil, err
	}
	// A misspelt key first: the checks below would report the key it
	// misses (comand = "x" is not "command is required").
	if und := cfg.Undecoded("upstreams"); len(und) > 0 {
		k := und[0]
		msg := "unknown key (see bub.toml.example)"
		if len(k) > 2 {
			if near := textmatch.CloseMatches(k[len(k)-1], tomlKeys(reflect.TypeFor[Server](), k[2:len(k)-1]), 1, 0.6); len(near) > 0 {
				msg = fmt.Sprintf("unknown key; did you mean %s?", near[0])
			}
		}
		return nil, cfg.Fail(msg, k...)
	}
	base := ""
	if cfg.Path != "" {
		base = filepath.Dir(cfg.Path)
	}
	byName := map[string]*Server{}
	file := filepath.Join(a.Home(), MCPJSONName)
	fromJSON, err := readMCPJSON(file, a.Getenv)
	if err != nil {
		return nil, err
	}
	if len(fromJSON.ignored) > 0 {
		m.log.Warn("upstream.mcpjson.ignored", "file", file, "fields", strings.Join(fromJSON.ignored, ", "),
			"why", "other clients' settings, which bub-mcp does not read")
	}
	for _, name := range fromJSON.disabled {
		m.log.Info("upstream.mcpjson.disabled", "file", file, "upstream", name)
	}
	for _, s := range fromJSON.servers {
		byName[s.name] = s
	}
	for name, s := range table {
		if s == nil {
			continue
		}
		s.name, s.origin = name, "bub.toml"
		fail := func(msg string, key ...string) error {
			return cfg.Fail(msg, append([]string{"upstreams", name}, key...)...)
		}
		if err := s.check(fail); err != nil {
			return nil, err
		}
		s.resolveCwd(base)
		if s.URL == "" && s.envName() == environment.SandboxName {
			at := cfg.NewModuleRef(environment.SandboxName, "upstreams", name, "sandbox")
			at.KindKey = []string{"upstreams", name, "environment"}
			m, err := sandbox.Policy(at, s.Sandbox)
			if err != nil {
				return nil, err
			}
			s.envModule = m
		}
		if prev, ok := byName[name]; ok {
			m.log.Info("upstream.override", "upstream", name, "used", "bub.toml", "ignored", prev.origin)
		}
		byName[name] = s
	}
	out := make([]*Server, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// Cleanup stops every upstream: their connections close, stdio servers
// are ended (SIGTERM, then SIGKILL), and their Environments are closed,
// which ends anything they left behind.
func (m *Module) Cleanup() error {
	if m.cancel == nil {
		return nil
	}
	ups := m.list()
	for _, u := range ups {
		u.close()
	}
	m.cancel()
	m.wg.Wait()
	m.memory.close()
	if m.closeStore != nil {
		m.closeStore()
	}
	if m.credentials.close != nil {
		m.credentials.close()
	}
	var errs []error
	for _, u := range ups {
		if err := u.closeEnvironment(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Status is what `bub-mcp upstreams` and /healthz show of one upstream.
type Status struct {
	Name      string    `json:"name"`
	Transport string    `json:"transport"` // "stdio" or "http"
	Origin    string    `json:"origin"`    // "bub.toml" or the mcp.json path
	Start     string    `json:"start"`
	State     State     `json:"state"`
	Since     time.Time `json:"since"`
	Tools     int       `json:"tools"`
	Restarts  int       `json:"restarts"`
	LastError string    `json:"last_error,omitempty"`
	// PID is a running stdio server's process (and process group) id.
	PID int `json:"pid,omitempty"`
	// Pin is the server's pin setting; Quarantined counts its tools held
	// back until a human approves them, Unapproved (pin = "warn") the
	// changed or new ones listed all the same.
	Pin         string `json:"pin"`
	Quarantined int    `json:"quarantined"`
	Unapproved  int    `json:"unapproved,omitempty"`
	// BearerTokenEnv, Headers and Env say what credentials bub-mcp sends
	// the server, by name only, never a value: the variable of
	// bearer_token_env, the header names, a stdio server's environment
	// variable names (sorted). Every principal's calls use them alike.
	BearerTokenEnv string   `json:"bearer_token_env,omitempty"`
	Headers        []string `json:"headers,omitempty"`
	Env            []string `json:"env,omitempty"`
	// Auth is the server's auth ("oauth" or "token_exchange": calls go
	// over per-principal connections, of which Connections are live).
	Auth        string `json:"auth,omitempty"`
	Connections int    `json:"connections,omitempty"`
}

// Status reports every upstream, sorted by name.
func (m *Module) Status() []Status {
	ups := m.list()
	out := make([]Status, 0, len(ups))
	for _, u := range ups {
		st := u.status()
		st.Pin = u.cfg.pinMode()
		st.Quarantined, st.Unapproved = m.pinCounts(u.cfg.name)
		st.BearerTokenEnv = u.cfg.BearerTokenEnv
		if st.Auth = u.cfg.Auth; u.cfg.perPrincipal() {
			st.Connections = u.pool.live()
		}
		st.Headers = slices.Sorted(maps.Keys(u.cfg.Headers))
		st.Env = slices.Sorted(maps.Keys(u.cfg.Env))
		out = append(out, st)
	}
	return out
}

func (u *upstream) status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return Status{Name: u.cfg.name, Transport: u.cfg.kind(), Origin: u.cfg.origin, Start: u.cfg.Start, State: u.state,
		Since: u.since, Tools: len(u.names), Restarts: u.restarts, LastError: u.lastErr, PID: u.cur.pid()}
}

// Healthz is Status as lines for /healthz.
func (m *Module) Healthz() []string {
	var out []string
	for _, s := range m.Status() {
		line := fmt.Sprintf("upstream %s: %s, %d tools", s.Name, s.State, s.Tools)
		if s.Quarantined > 0 {
			line += fmt.Sprintf(", %d quarantined", s.Quarantined)
		}
		if s.LastError != "" {
			line += ", last error: " + strings.ReplaceAll(s.LastError, "\n", " ")
		}
		out = append(out, line)
	}
	return out
}

// FromApp returns an App's upstream module, if it is loaded.
func FromApp(a *app.App) (*Module, bool) {
	mod, ok := a.Module("upstream")
	if !ok {
		return nil, false
	}
	m, ok := mod.(*Module)
	return m, ok
}

// cacheEntry is a remembered tool list, valid for the configuration it
// was listed with.
type cacheEntry struct {
	Config string            `json:"config"`
	Tools  []json.RawMessage `json:"tools"`
}

// configDigest identifies what a server is; a remembered list of another
// configuration is not used.
func configDigest(s *Server) string {
	parts := []any{s.Command, s.Args, s.Env, s.Cwd, s.URL, s.Headers, s.kind()}
	if s.Auth != "" { // only then, so other servers' remembered lists stay valid
		parts = append(parts, s.Auth)
	}
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func digestOf(raws []json.RawMessage) string {
	h := sha256.New()
	for _, r := range raws {
		h.Write(r)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (m *Module) cacheFile(s *Server) string { return filepath.Join(m.cache, s.name+".json") }

// remember stores a server's tool list, so the next start lists its
// tools at once: without starting it (lazy), or while it starts (eager).
func (m *Module) remember(s *Server, raws []json.RawMessage) {
	b, err := json.Marshal(cacheEntry{Config: configDigest(s), Tools: raws})
	if err == nil {
		err = lockedfile.Write(m.cacheFile(s), b, 0o600)
	}
	if err != nil {
		m.log.Warn("upstream.cache", "upstream", s.name, "error", err)
	}
}

// remembered reads a server's stored tool list.
func (m *Module) remembered(s *Server) ([]json.RawMessage, bool) {
	b, err := os.ReadFile(m.cacheFile(s))
	if err != nil {
		return nil, false
	}
	var e cacheEntry
	if json.Unmarshal(b, &e) != nil || e.Config != configDigest(s) {
		return nil, false
	}
	return e.Tools, true
}

var _ app.Provisioner = (*Module)(nil)
var _ app.CleanerUpper = (*Module)(nil)
var _ mcpserver.Extender = (*Module)(nil)

// stopping reports whether the module is shutting down.
func (m *Module) stopping() bool { return m.ctx.Err() != nil }
