package environment

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
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
	// Python is the interpreter code runs with; empty means DefaultPython.
	Python string
	// Logger receives the environment's own records; nil means
	// slog.Default().
	Logger *slog.Logger
	// Sandbox is the profile's sandbox policy, used by the "sandbox"
	// environment (which is always confined, whatever Confine says).
	Sandbox SandboxPolicy
	// PythonCache is the owner's memory of where Python lives (the
	// sandbox module keeps one per App), so that a new session's sandbox
	// does not ask the interpreter again; nil means asking each time.
	PythonCache *PythonCache
}

// Factory makes the environment for one session, like Bub's
// provide_environment hook. The caller owns the result and closes it when
// the session ends or the application stops. A factory must honour ctx
// while it starts things.
type Factory func(ctx context.Context, o Options) (Environment, error)

var (
	factoriesMu sync.RWMutex
	factories   = map[string]Factory{}
)

// DefaultName is the environment a profile gets when it names none.
const DefaultName = "local"

// Register makes an environment available by name, for profiles to pick
// with `environment = "<name>"`. It is meant for init functions and
// panics, as database/sql's Register does, on an empty name, a nil
// factory or a name registered twice.
func Register(name string, f Factory) {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	if strings.TrimSpace(name) == "" {
		panic("environment: Register with an empty name")
	}
	if f == nil {
		panic("environment: Register of a nil factory for " + name)
	}
	if _, dup := factories[name]; dup {
		panic("environment: Register called twice for " + name)
	}
	factories[name] = f
}

// Names returns the registered environment names, sorted.
func Names() []string {
	factoriesMu.RLock()
	defer factoriesMu.RUnlock()
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the factory registered under name; the error for an
// unknown one lists the registered names and hints at the usual cause.
func Lookup(name string) (Factory, error) {
	factoriesMu.RLock()
	f, ok := factories[name]
	factoriesMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("environment: unknown environment %q (registered: %s; forgotten import?)", name, strings.Join(Names(), ", "))
	}
	return f, nil
}

func init() {
	Register(DefaultName, func(ctx context.Context, o Options) (Environment, error) {
		if err := checkCtx(ctx); err != nil {
			return nil, err
		}
		return NewLocal(&LocalOptions{Workspace: o.Workspace, Confine: o.Confine, AllowPaths: o.AllowPaths, Python: o.Python})
	})
	Register(SandboxName, func(ctx context.Context, o Options) (Environment, error) {
		if err := checkCtx(ctx); err != nil {
			return nil, err
		}
		return NewSandbox(&SandboxOptions{Workspace: o.Workspace, AllowPaths: o.AllowPaths, Python: o.Python, Policy: o.Sandbox, PythonCache: o.PythonCache})
	})
}
