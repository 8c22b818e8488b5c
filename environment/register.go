package environment

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/bubbuild/bub-mcp/modules"
)

// Options are what the application knows when it asks a factory for a
// session's environment. A factory uses what applies to it and ignores
// the rest.
type Options struct {
	// Session is the session the environment serves.
	Session string
	// Workspace is the absolute directory the session works in.
	Workspace string
	// Confine asks file tools' paths to stay inside Workspace (and
	// AllowPaths).
	Confine bool
	// AllowPaths are extra roots that pass confinement for reading only,
	// such as the directory holding code mode's tool stubs; writes
	// beneath them are refused (ErrReadOnly) wherever paths are confined.
	AllowPaths []string
	// Hidden are roots no tool may reach: the application passes its own
	// home ($BUB_HOME: bub.toml with its secrets, the audit log, state),
	// which may lie inside the workspace (the default ~/.bub under a
	// workspace of ~). Every kind must honour it wherever it confines:
	// confined file operations refuse paths beneath these roots, through
	// ".." and symlinks too, with an error wrapping ErrOutsideWorkspace,
	// and an isolating kind keeps its processes from seeing or changing
	// them. A path is decided by its innermost root, so AllowPaths beneath
	// a hidden root stay readable (and a workspace inside one stays
	// usable); a workspace that is itself a hidden root is hidden whole.
	// The local kind without Confine reaches everything by design,
	// processes included.
	Hidden []string
	// Python is the interpreter code runs with; empty means DefaultPython.
	Python string
	// Logger receives the environment's own records; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Factory makes the environment for one session, like Bub's
// provide_environment hook. The caller owns the result and closes it when
// the session ends or the application stops. A factory must honour ctx
// while it starts things.
type Factory func(ctx context.Context, o Options) (Environment, error)

// Module is an environment module, registered in package modules under
// the ID "environment.<kind>": the application makes one instance per use
// (a profile's environment, an upstream server's), decodes that use's own
// configuration table into it ([profiles.<name>.environment] with kind =
// "<kind>"), provisions it when it can be, and then asks it for each
// session's Environment. A configurable Environment is thus a module
// with toml-tagged fields; nothing in config or here needs to know them.
type Module interface {
	modules.Module
	// NewEnvironment makes the Environment of one session. The caller
	// owns the result and closes it when the session ends or the
	// application stops; it must honour ctx while it starts things.
	NewEnvironment(ctx context.Context, o Options) (Environment, error)
}

// Namespace is the module namespace of environments.
const Namespace = "environment"

// DefaultName is the environment a profile gets when it names none.
const DefaultName = "local"

// factoryModule is an environment registered with Register: a Factory
// with no configuration of its own.
type factoryModule struct {
	name string
	f    Factory
}

func (m *factoryModule) BubModule() modules.Info {
	return modules.Info{ID: Namespace + "." + m.name, New: func() modules.Module { return m }}
}

func (m *factoryModule) NewEnvironment(ctx context.Context, o Options) (Environment, error) {
	return m.f(ctx, o)
}

// Register makes an environment without configuration keys available by
// name, for profiles to pick with [profiles.<name>.environment] kind =
// "<name>": it registers the module environment.<name> (see Module) whose
// NewEnvironment is f. It is meant for init functions and panics, as
// database/sql's Register does, on a bad or empty name, a nil factory or
// a name registered twice.
func Register(name string, f Factory) {
	if strings.TrimSpace(name) == "" {
		panic("environment: Register with an empty name")
	}
	if strings.Contains(name, ".") {
		panic("environment: Register of " + name + ": a name has no dots (it is the last word of the module ID)")
	}
	if f == nil {
		panic("environment: Register of a nil factory for " + name)
	}
	modules.Register(&factoryModule{name, f})
}

// Names returns the registered environment kinds, sorted.
func Names() []string { return modules.Names(Namespace) }

// LookupModule returns the module registered as environment.<name>; the
// error for an unknown one lists the registered kinds and hints at the
// usual cause.
func LookupModule(name string) (modules.Info, error) {
	info, err := modules.Lookup(Namespace + "." + name)
	if err != nil {
		return modules.Info{}, fmt.Errorf("environment: %w", err)
	}
	if _, ok := info.New().(Module); !ok {
		return modules.Info{}, fmt.Errorf("environment: module %s makes no Environment (it lacks NewEnvironment)", info.ID)
	}
	return info, nil
}

// Lookup returns a Factory for the environment kind name made with no
// configuration keys, as a profile naming only its kind gets it.
func Lookup(name string) (Factory, error) {
	info, err := LookupModule(name)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, o Options) (Environment, error) {
		return info.New().(Module).NewEnvironment(ctx, o)
	}, nil
}

func init() {
	Register(DefaultName, func(ctx context.Context, o Options) (Environment, error) {
		if err := checkCtx(ctx); err != nil {
			return nil, err
		}
		return NewLocal(&LocalOptions{Workspace: o.Workspace, Confine: o.Confine, AllowPaths: o.AllowPaths, Hidden: o.Hidden, Python: o.Python})
	})
}
