// Package app is bub-mcp's composition root: it turns a configuration
// into a running application. It provisions the registered modules (which
// contribute tools, hooks, filters, the code-mode split and resources),
// gives each connection a session, an Environment and a View, and runs
// every call — an MCP client's, an agent step's, a nested call from
// run_code, a human's command — through one path, Call.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/bubbuild/bub-mcp/telemetry"
)

// Options configure an App. Zero values are documented per field.
type Options struct {
	// Config is required (config.Default() for zero configuration).
	Config *config.Config
	// Registry holds the tools plugins registered outside any module
	// (registry.MustRegister in init); nil means registry.Default. The App
	// copies them into its own registry, next to its modules' tools.
	Registry *registry.Registry
	// Modules lists the IDs of the modules to load; nil means every
	// registered module.
	Modules []string
	// Home is $BUB_HOME; empty means sessions.DefaultHome().
	Home string
	// Workspace is used by profiles without one; empty means the current
	// directory.
	Workspace string
	// Getenv reads environment variables; nil means os.Getenv.
	Getenv func(string) string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Telemetry traces and measures the nested calls of run_code (the
	// MCP server traces the requests themselves); nil means none. The App
	// does not shut it down: whoever made it does.
	Telemetry *telemetry.Telemetry
	// OnDemand says the App serves one short command (bub-mcp call,
	// config check) rather than clients: modules start nothing in the
	// background at Provision (upstream servers are spawned only when one
	// of their tools is called), so a builtin call costs no upstream start.
	OnDemand bool
}

// toolsConfig is the part of [tools] the App reads itself.
type toolsConfig struct {
	// MaxConcurrency bounds a batch of calls (Bub's max_tool_concurrency);
	// 0 means unbounded.
	MaxConcurrency int `toml:"max_concurrency"`
}

// App is one running bub-mcp: its modules, registry, sessions,
// environments and views. It is safe for concurrent use. Two Apps in one
// process share nothing but the module and tool registrations.
type App struct {
	cfg       *config.Config
	reg       *registry.Registry
	store     *sessions.Store
	audit     *audit.Log         // nil when [audit] enabled = false
	replica   string             // "" on a file store
	storeDSN  string             // the [store] database's, "" unless kind = "postgres"
	onDemand  bool               // Options.OnDemand
	exec      *registry.Executor // direct calls: rendered, hooked
	commands  *registry.Executor // a human's commands: rendered, no hooks, no spill
	nested    *registry.Executor // run_code's calls: same hooks, unrendered
	chain     *providers.Chain
	home      string
	workspace string
	getenv    func(string) string
	log       *slog.Logger
	tel       *telemetry.Telemetry
	runs      atomic.Uint64
	// maxConcurrency is [tools] max_concurrency: it bounds a batch of
	// direct calls (in the executor) and the calls one run_code makes
	// at once (asyncio.gather); 0 means unbounded.
	maxConcurrency int

	// Contributions, collected while modules provision, read-only after.
	provisioning bool
	mods         []loaded
	uses         []loaded                      // LoadModule's, cleaned up before mods
	profileEnvs  map[string]environment.Module // by profile name
	hooks        []registry.Hooks
	filters      []providers.Provider
	codeMode     providers.CodeModeFunc
	envSetups    []func(conn *providers.Connection, o *environment.Options)
	resources    []Resource

	// envs maps envKey to each session's environment.Environment, read
	// by every call without a lock: making one may take a while (the
	// sandbox's first asks Python where it lives, ~100 ms through a pyenv
	// shim), and under a lock every call of every other session waited
	// for it. mu serialises making, forgetting and closing them.
	mu     sync.Mutex
	envs   sync.Map
	closed atomic.Bool

	dyn dynamicTools // tools that change while the App runs (dynamic.go)

	// warm runs registry.WarmValidation warmValidationAfter after New;
	// Close stops it.
	warm *time.Timer
}

// warmValidationAfter is when New has registry.WarmValidation run: late
// enough that a server has answered its client's first requests (bub-mcp
// serve answers its first tools/list ~10-20 ms after it was spawned) and
// the work does not compete with them for the CPU, early enough that a
// model's first tools/call finds it done, and before serve's forced
// collection (100 ms) returns its garbage to the OS.
const warmValidationAfter = 50 * time.Millisecond

type loaded struct {
	id string
	m  Module
}

type envKey struct{ session, workspace, profile string }

// Resource is a readable MCP resource a module offers, such as code mode's
// stub. Read gets the resolved caller.
type Resource struct {
	URI, Name, Description, MIMEType string
	// Read returns the resource's text for conn; an error fails the read.
	Read func(ctx context.Context, conn *providers.Connection) (string, error)
}

// New builds an App: it opens the session store, then makes, configures,
// provisions and validates each module in ID order, and finally checks
// that every configuration key was understood. On failure everything
// provisioned so far is cleaned up.
func New(ctx context.Context, opts *Options) (_ *App, err error) {
	if opts == nil || opts.Config == nil {
		return nil, errors.New("app: Options.Config is required")
	}
	o := *opts
	if o.Registry == nil {
		o.Registry = registry.Default
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Home == "" {
		var err error
		if o.Home, err = sessions.DefaultHome(); err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
	}
	// Absolute, once: the home is hidden from every Environment's tools,
	// and a relative path would be taken against each one's workspace.
	home, err := filepath.Abs(o.Home)
	if err != nil {
		return nil, fmt.Errorf("app: home: %w", err)
	}
	o.Home = home
	if o.Workspace == "" {
		var err error
		if o.Workspace, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("app: workspace: %w", err)
		}
	}
	a := &App{cfg: o.Config, reg: registry.New(), home: o.Home, workspace: o.Workspace, getenv: o.Getenv, log: o.Logger, tel: o.Telemetry,
		onDemand: o.OnDemand, provisioning: true}
	for _, t := range o.Registry.Tools() {
		if err := a.reg.Register(t); err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
	}
	for _, h := range o.Registry.Hooks() {
		a.reg.AddHooks(h)
	}
	var tools toolsConfig
	if err := o.Config.Decode("tools", &tools); err != nil {
		return nil, err
	}
	if tools.MaxConcurrency < 0 {
		return nil, o.Config.Fail("must be >= 0", "tools", "max_concurrency")
	}
	pgDSN, err := a.openStore(ctx, &o)
	a.storeDSN = pgDSN
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if cerr := a.Close(); cerr != nil {
				a.log.Warn("app.cleanup", "error", cerr)
			}
		}
	}()
	if a.audit, err = openAudit(o.Config, a.store.Home(), pgDSN, &o); err != nil {
		return nil, err
	}
	if err := a.loadModules(ctx, o.Modules); err != nil {
		return nil, err
	}
	if err := a.loadProfiles(ctx); err != nil {
		return nil, err
	}
	if err := a.claimSharedTables(); err != nil {
		return nil, err
	}
	if err := o.Config.Check(); err != nil {
		return nil, err
	}
	a.provisioning = false
	a.maxConcurrency = tools.MaxConcurrency
	a.exec = registry.NewExecutor(a.reg, &registry.ExecutorOptions{MaxConcurrency: tools.MaxConcurrency, Hooks: a.hooks, Logger: a.log})
	a.nested = registry.NewExecutor(a.reg, &registry.ExecutorOptions{Raw: true, Hooks: a.hooks, Logger: a.log})
	a.commands = registry.NewExecutor(a.reg, &registry.ExecutorOptions{NoHooks: true, RuntimeNames: true, Logger: a.log})
	filters := append([]providers.Provider{providers.ScopeProvider(a.scope)}, a.filters...)
	a.chain = providers.NewChain(a.reg, &providers.ChainOptions{Filters: filters, CodeMode: a.codeMode,
		Providers: []providers.Provider{a.namedProviders}, Loaded: a.loadedTools})
	a.viewsBuilt(a.chain)
	if !o.OnDemand {
		// A server's first calls need the validator; a one-shot command
		// compiles it on its one call, if any.
		a.warm = time.AfterFunc(warmValidationAfter, registry.WarmValidation)
	}
	return a, nil
}

// loadModules makes, configures, provisions and validates the modules.
func (a *App) loadModules(ctx context.Context, ids []string) error {
	var infos []ModuleInfo
	if ids == nil {
		infos = Modules()
	} else {
		for _, id := range ids {
			info, err := lookupModule(id)
			if err != nil {
				return err
			}
			infos = append(infos, info)
		}
	}
	for _, info := range infos {
		m := info.New()
		if info.Config != "" {
			if err := a.cfg.Decode(info.Config, m); err != nil {
				return err
			}
		}
		a.mods = append(a.mods, loaded{info.ID, m})
		if p, ok := m.(Provisioner); ok {
			if err := p.Provision(ctx, a); err != nil {
				return fmt.Errorf("app: module %s: %w", info.ID, err)
			}
		}
	}
	for _, l := range a.mods {
		if v, ok := l.m.(Validator); ok {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("app: module %s: %w", l.id, err)
			}
		}
	}
	return nil
}

// loadProfiles loads each profile's environment module and refuses
// profiles that name providers nobody registered, listing what is there.
func (a *App) loadProfiles(ctx context.Context) error {
	a.profileEnvs = map[string]environment.Module{}
	for _, name := range a.cfg.ProfileNames() {
		p := a.cfg.Profiles[name]
		m, err := a.LoadModule(ctx, environment.Namespace, environment.DefaultName, p.Environment)
		if err != nil {
			return err
		}
		em, ok := m.(environment.Module)
		if !ok {
			return p.Environment.FailKind(fmt.Sprintf("module %s makes no Environment (it lacks NewEnvironment)", m.BubModule().ID))
		}
		a.profileEnvs[name] = em
		for _, pn := range p.Providers {
			if _, err := providers.Lookup(pn); err != nil {
				return a.cfg.Fail(err.Error(), "profiles", name, "providers")
			}
		}
	}
	return nil
}

// mustProvision panics when a contribution arrives after New returned: the
// View chain and executors are built by then, so a late one would be
// silently lost.
func (a *App) mustProvision(what string) {
	if !a.provisioning {
		panic("app: " + what + " called after the App was built; call it from Provision")
	}
}

// RegisterTool adds a module's tool to this App's registry.
func (a *App) RegisterTool(t *registry.Tool) error {
	a.mustProvision("RegisterTool")
	return a.reg.Register(t)
}

// AddHooks adds builtin hooks (spill, policies). They count as registered
// before the plugins' registry hooks, so they run after them, as Bub's
// builtin plugin does.
func (a *App) AddHooks(h registry.Hooks) {
	a.mustProvision("AddHooks")
	a.hooks = append(a.hooks, h)
}

// AddFilter adds a filter that decides, before code mode is prepared,
// which tools in a connection's scope are available at all (the agent's
// tools only where a model is configured).
func (a *App) AddFilter(p providers.Provider) {
	a.mustProvision("AddFilter")
	a.filters = append(a.filters, p)
}

// SetCodeMode installs the code-mode split; there is at most one.
func (a *App) SetCodeMode(f providers.CodeModeFunc) error {
	a.mustProvision("SetCodeMode")
	if a.codeMode != nil {
		return errors.New("app: code mode is already provided by another module")
	}
	a.codeMode = f
	return nil
}

// AddResource offers a readable resource to MCP clients.
func (a *App) AddResource(r Resource) {
	a.mustProvision("AddResource")
	a.resources = append(a.resources, r)
}

// ConfigureEnvironment lets a module adjust the options each session's
// Environment is made with (code mode sets the interpreter and keeps its
// stubs readable under confinement).
func (a *App) ConfigureEnvironment(f func(conn *providers.Connection, o *environment.Options)) {
	a.mustProvision("ConfigureEnvironment")
	a.envSetups = append(a.envSetups, f)
}

// Modules returns the loaded module instances in load order, for
// transports that look for optional interfaces on them.
func (a *App) Modules() []Module {
	out := make([]Module, len(a.mods))
	for i, l := range a.mods {
		out[i] = l.m
	}
	return out
}

// Resources returns the modules' resources.
func (a *App) Resources() []Resource { return slices.Clone(a.resources) }

// Module returns the loaded instance of a module, for commands that need
// its configuration (the agent command asks the agent module).
func (a *App) Module(id string) (Module, bool) {
	for _, l := range a.mods {
		if l.id == id {
			return l.m, true
		}
	}
	return nil, false
}

// Config returns the configuration the App runs with.
func (a *App) Config() *config.Config { return a.cfg }

// Registry returns the App's tool registry.
func (a *App) Registry() *registry.Registry { return a.reg }

// Store returns the session store.
func (a *App) Store() *sessions.Store { return a.store }

// Replica names this process among the replicas sharing its session
// store ($BUB_REPLICA, else the host name); "" on a file store, where
// there are no replicas. Replica-local things (background shells) carry
// it in their ids.
func (a *App) Replica() string { return a.replica }

// StoreDSN is the connection string of the [store] database when [store]
// kind = "postgres", else "": what the parts that replicas must share
// (approvals, rate-limit buckets) keep their state in.
func (a *App) StoreDSN() string { return a.storeDSN }

// AuditDir is where the audit log is written, "" when it is turned off.
func (a *App) AuditDir() string {
	if a.audit == nil {
		return ""
	}
	return a.audit.Dir()
}

// Home returns $BUB_HOME, absolute.
func (a *App) Home() string { return a.home }

// OnDemand reports Options.OnDemand: start background services (such as
// upstream servers) on first use only.
func (a *App) OnDemand() bool { return a.onDemand }

// Telemetry returns the telemetry the App was built with (nil if none).
func (a *App) Telemetry() *telemetry.Telemetry { return a.tel }

// Logger returns the App's logger.
func (a *App) Logger() *slog.Logger { return a.log }

// Getenv reads an environment variable as the App was told to.
func (a *App) Getenv(key string) string { return a.getenv(key) }

func (a *App) scope(conn *providers.Connection) providers.Scope {
	if p, ok := a.cfg.Profiles[conn.Profile]; ok {
		return p.Scope()
	}
	return providers.Scope{Allow: []string{"\x00none"}} // unknown profile: nothing
}

// namedProviders runs the registered providers the connection's profile
// names, in registration order.
func (a *App) namedProviders(ctx context.Context, conn *providers.Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
	p, ok := a.cfg.Profiles[conn.Profile]
	if !ok || len(p.Providers) == 0 {
		return tools, "", nil
	}
	return providers.Run(ctx, p.Providers, conn, tools)
}

// Profile returns a profile by name.
func (a *App) Profile(name string) (*config.Profile, error) {
	if name == "" {
		name = config.DefaultProfile
	}
	p, ok := a.cfg.Profiles[name]
	if !ok {
		return nil, fmt.Errorf("app: unknown profile %q (defined: %v)", name, a.cfg.ProfileNames())
	}
	return p, nil
}

// Resolve fills in a connection's session key, workspace and code-mode
// setting from its profile and the session's persisted settings.
func (a *App) Resolve(ctx context.Context, conn *providers.Connection) error {
	p, err := a.Profile(conn.Profile)
	if err != nil {
		return err
	}
	conn.Profile = p.Name
	if conn.SessionKey == "" {
		conn.SessionKey = p.SessionKey()
	}
	if conn.Workspace == "" {
		conn.Workspace = p.Workspace
		if conn.Workspace == "" {
			conn.Workspace = a.workspace
		}
	}
	sess, err := a.Session(conn)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	conn.CodeMode = p.CodeMode
	if cm := sess.Settings().CodeMode; cm != nil {
		conn.CodeMode = *cm
	}
	return nil
}

// View returns the resolved connection's View. Building a View writes
// nothing; the files it refers to (code mode's stub) are written here,
// once, the first time the View is handed out.
func (a *App) View(ctx context.Context, conn *providers.Connection) (*providers.View, error) {
	v, err := a.chain.View(ctx, conn)
	if err != nil {
		return nil, err
	}
	if err := v.WriteFiles(); err != nil && conn.CodeMode {
		// Without its stub the model cannot know the code tools'
		// signatures: serve the tools directly rather than fail the View.
		// WriteFiles runs once per View, so warn once per View too.
		v.Memo(filesWarned{}, func() any {
			a.log.WarnContext(ctx, "app.view.files", "session", conn.SessionKey, "error", err, "effect", "code mode falls back to direct tools")
			return true
		})
		direct := *conn
		direct.CodeMode = false
		return a.chain.View(ctx, &direct)
	}
	return v, nil
}

// filesWarned keys the one warning per View whose files could not be
// written.
type filesWarned struct{}

// Session returns the resolved connection's session.
func (a *App) Session(conn *providers.Connection) (*sessions.Session, error) {
	return a.store.Session(conn.Workspace, conn.SessionKey)
}

// Forget releases what the App keeps for a session that ended: its
// cached Views, its Environment (killing its processes) and, for a
// temporary session, the session itself. The agent forgets a subagent's
// temporary session when its turn ends; the caller must be its last user.
func (a *App) Forget(conn *providers.Connection) {
	a.chain.Forget(conn.SessionKey)
	key := envKey{conn.SessionKey, conn.Workspace, conn.Profile}
	a.mu.Lock()
	v, _ := a.envs.LoadAndDelete(key)
	a.mu.Unlock()
	if env, ok := v.(environment.Environment); ok {
		if err := env.Close(); err != nil {
			a.log.Warn("app.environment.close", "session", conn.SessionKey, "error", err)
		}
	}
	if sessions.IsTemp(conn.SessionKey) {
		if err := a.store.Release(conn.Workspace, conn.SessionKey); err != nil {
			a.log.Warn("app.session.release", "session", conn.SessionKey, "error", err)
		}
	}
}

// Environment returns the session's Environment, made on first use by the
// environment the profile names (default "local").
func (a *App) Environment(ctx context.Context, conn *providers.Connection) (environment.Environment, error) {
	key := envKey{conn.SessionKey, conn.Workspace, conn.Profile}
	if a.closed.Load() {
		return nil, environment.ErrClosed
	}
	if env, ok := a.envs.Load(key); ok {
		return env.(environment.Environment), nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed.Load() {
		return nil, environment.ErrClosed
	}
	if env, ok := a.envs.Load(key); ok { // made while this call waited
		return env.(environment.Environment), nil
	}
	p, err := a.Profile(conn.Profile)
	if err != nil {
		return nil, err
	}
	mod, ok := a.profileEnvs[p.Name]
	if !ok {
		return nil, fmt.Errorf("app: profile %q has no environment", p.Name)
	}
	// The home holds bub.toml's secrets and the audit log: no profile's
	// tools may reach it, even inside a workspace of ~.
	o := environment.Options{Session: conn.SessionKey, Workspace: conn.Workspace, Confine: p.Confine,
		Hidden: []string{a.home}, Logger: a.log}
	for _, f := range a.envSetups {
		f(conn, &o)
	}
	env, err := mod.NewEnvironment(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("app: environment %q for session %q: %w", mod.BubModule().Name(), conn.SessionKey, err)
	}
	a.envs.Store(key, env)
	return env, nil
}

// newRunID returns a fresh run id, unique within the App.
func (a *App) newRunID(conn *providers.Connection) string {
	return conn.Transport + "-" + strconv.FormatUint(a.runs.Add(1), 10)
}

// Close ends every Environment (killing their processes), cleans up the
// modules in reverse order and flushes the tapes. It is safe to call
// more than once.
func (a *App) Close() error {
	a.mu.Lock()
	if a.closed.Load() {
		a.mu.Unlock()
		return nil
	}
	a.closed.Store(true)
	if a.warm != nil {
		a.warm.Stop()
	}
	var envs []environment.Environment
	a.envs.Range(func(k, v any) bool {
		envs = append(envs, v.(environment.Environment))
		a.envs.Delete(k)
		return true
	})
	a.mu.Unlock()
	var errs []error
	for _, env := range envs {
		if err := env.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(a.uses) - 1; i >= 0; i-- {
		if c, ok := a.uses[i].m.(CleanerUpper); ok {
			if err := c.Cleanup(); err != nil {
				errs = append(errs, fmt.Errorf("app: module %s: cleanup: %w", a.uses[i].id, err))
			}
		}
	}
	for i := len(a.mods) - 1; i >= 0; i-- {
		if c, ok := a.mods[i].m.(CleanerUpper); ok {
			if err := c.Cleanup(); err != nil {
				errs = append(errs, fmt.Errorf("app: module %s: cleanup: %w", a.mods[i].id, err))
			}
		}
	}
	if a.store != nil {
		if err := a.store.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if a.audit != nil {
		if err := a.audit.Close(); err != nil {
			errs = append(errs, fmt.Errorf("app: audit log: %w", err))
		}
	}
	return errors.Join(errs...)
}
