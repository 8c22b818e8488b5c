package codemode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/codemode/runner"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

func init() {
	app.RegisterModule(new(Module))
}

// Defaults of the [codemode] settings and of run_code's timeout. The
// runner's own defaults are the same constants, so each setting has one.
const (
	// DefaultPython is the interpreter run_code starts, as in Bub.
	DefaultPython = runner.DefaultPython
	// DefaultTimeoutSeconds is run_code's timeout_seconds when the model
	// gives none.
	DefaultTimeoutSeconds = 120
	// DefaultMaxTimeoutSeconds bounds timeout_seconds: a model cannot keep
	// an interpreter (and the call) busy for longer.
	DefaultMaxTimeoutSeconds = 600
	// DefaultMaxCalls bounds the nested calls of one run, so a loop in
	// model-written code cannot flood the tools.
	DefaultMaxCalls = runner.DefaultMaxCalls
	// DefaultMemory is each interpreter's address-space limit: a run
	// that allocates more gets MemoryError instead of the machine's
	// memory.
	DefaultMemory = 1 << 30
	// DefaultPool is how many interpreters are kept started per
	// environment.
	DefaultPool = runner.DefaultPool
)

// Module is code mode in one App: the run_code tool, the code_mode
// command, the View split (Split), the stub resource and one Python
// runner per session Environment. Its exported fields are the [codemode]
// table of bub.toml; Provision replaces their zero values with the
// defaults. What it keeps (the runners) is the instance's own and ends
// with Cleanup, so two Apps in one process share nothing.
type Module struct {
	// Python is the interpreter run_code needs; "" means DefaultPython.
	// When exec.LookPath cannot find it, Provision warns once and
	// run_code is never offered: every View keeps its tools direct.
	Python string `toml:"python"`
	// MaxTimeoutSeconds bounds run_code's timeout_seconds; 0 means
	// DefaultMaxTimeoutSeconds, a negative value is refused.
	MaxTimeoutSeconds int `toml:"max_timeout_seconds"`
	// MaxCalls bounds the nested tool calls of one run; 0 means
	// DefaultMaxCalls, a negative value is refused.
	MaxCalls int `toml:"max_calls"`
	// Memory is each interpreter's address-space limit (RLIMIT_AS), like
	// "1GiB"; 0 means DefaultMemory.
	Memory config.Size `toml:"memory"`
	// Pool is how many interpreters each environment keeps ready,
	// imports done (forked ahead by its fork server, or started ahead
	// where it has none); 0 means DefaultPool, a negative value is
	// refused.
	Pool int `toml:"pool"`

	python func() string // Python resolved to the real executable (asked once)
	// resolved is python's answer once it has one (see pythonNow).
	resolved atomic.Pointer[string]
	// resolveSoon asks for python in the background after start-up.
	resolveSoon *time.Timer
	home        string // absolute $BUB_HOME: stub paths go into prompts
	log         *slog.Logger
	available   bool // Python was found at Provision
	// admit are the profiles' code_mode_tools (globs and hints), by
	// profile name; a profile without one admits every tool.
	admit   map[string][]string
	runners runnerSet
}

// BubModule registers the module as "codemode", configured by [codemode].
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "codemode", Config: "codemode", New: func() app.Module { return new(Module) }}
}

// errNoCodeMode answers a stub read from a connection without code mode,
// naming both ways to turn it on.
var errNoCodeMode = errors.New("code mode is not active for this session: enable it with `bub-mcp call code_mode enable=true`, or code_mode = true in the profile")

// Provision checks the settings, looks for Python once (a missing
// interpreter is a warning, not an error, so the rest of bub-mcp still
// works) and contributes run_code, code_mode, the split, the stub
// resource, and the environment settings code mode needs: its
// interpreter, and the stub directory readable under confinement while
// the rest of $BUB_HOME (tapes) stays out of reach.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	if m.MaxTimeoutSeconds < 0 {
		return a.Config().Fail("must be >= 0", "codemode", "max_timeout_seconds")
	}
	if m.MaxCalls < 0 {
		return a.Config().Fail("must be >= 0", "codemode", "max_calls")
	}
	if m.Pool < 0 {
		return a.Config().Fail("must be >= 0", "codemode", "pool")
	}
	if m.Memory > 0 && m.Memory < 64<<20 {
		return a.Config().Fail("must be at least 64MiB (Python needs that much address space to start)", "codemode", "memory")
	}
	if m.Memory == 0 {
		m.Memory = DefaultMemory
	}
	if m.Pool == 0 {
		m.Pool = DefaultPool
	}
	if m.Python == "" {
		m.Python = DefaultPython
	}
	if m.MaxTimeoutSeconds == 0 {
		m.MaxTimeoutSeconds = DefaultMaxTimeoutSeconds
	}
	if m.MaxCalls == 0 {
		m.MaxCalls = DefaultMaxCalls
	}
	home, err := filepath.Abs(a.Home())
	if err != nil {
		return fmt.Errorf("codemode: %w", err)
	}
	m.home, m.log = home, a.Logger()
	m.admit = map[string][]string{}
	for name, p := range a.Config().Profiles {
		if p != nil && len(p.CodeModeTools) > 0 {
			m.admit[name] = p.CodeModeTools
		}
	}
	m.runners.log = m.log
	resolve := func() string { return m.Python }
	if _, err := exec.LookPath(m.Python); err != nil {
		m.log.Warn("codemode.python.missing", "python", m.Python, "error", err,
			"effect", "run_code is not offered; code mode falls back to direct tools",
			"fix", "install Python or set [codemode] python in bub.toml")
	} else {
		m.available = true
		resolve = func() string {
			exe, err := environment.ResolvePython(m.Python)
			if err != nil {
				m.log.Warn("codemode.python.resolve", "python", m.Python, "error", err,
					"effect", "every run starts through the command as given")
				return m.Python
			}
			return exe
		}
	}
	m.python = sync.OnceValue(func() string {
		p := resolve()
		m.resolved.Store(&p)
		return p
	})
	if m.available {
		// Asked soon, but not during start-up: through a version
		// manager's shim (pyenv) the answer costs 40-150 ms of CPU, which
		// made the first tools/list 3x later on two cores. A run_code
		// that comes first asks itself.
		m.resolveSoon = time.AfterFunc(pythonResolveDelay, func() { m.python() })
	}
	for _, t := range []*registry.Tool{m.runCodeTool(), m.codeModeTool()} {
		if err := a.RegisterTool(t); err != nil {
			return fmt.Errorf("codemode: %w", err)
		}
	}
	if err := a.SetCodeMode(m.Split); err != nil {
		return err
	}
	a.AddResource(app.Resource{
		URI:         StubURI,
		Name:        "code-mode tool stub",
		Description: "The Python stub declaring the tools callable inside run_code as `await tools.<name>(...)` (code mode only).",
		MIMEType:    "text/x-python",
		Read: func(ctx context.Context, conn *providers.Connection) (string, error) {
			v, err := a.View(ctx, conn)
			if err != nil {
				return "", err
			}
			content, _, ok, err := ViewStub(m.home, conn, v)
			if err != nil {
				return "", err
			}
			if !ok {
				return "", errNoCodeMode
			}
			return content, nil
		},
	})
	stubs := filepath.Join(m.home, "codemode")
	a.ConfigureEnvironment(func(conn *providers.Connection, o *environment.Options) {
		o.Python = m.pythonNow()
		o.AllowPaths = append(o.AllowPaths, stubs)
	})
	return nil
}

// Cleanup closes every runner, killing the interpreters started ahead;
// it copes with a module that was never provisioned.
func (m *Module) Cleanup() error {
	if m.resolveSoon != nil {
		m.resolveSoon.Stop()
	}
	return m.runners.close()
}

// pythonResolveDelay is how long after start-up the interpreter is asked
// where it lives.
const pythonResolveDelay = 2 * time.Second

// pythonNow is python's answer if it has one (resolveSoon asks 2 s after
// start-up), else the command as configured. Every session's first call
// of any tool makes its Environment, which must not wait the 40-150 ms a
// version manager's shim takes to answer (bub-mcp call fs.read took
// 0.10 s instead of 0.02 s); run_code asks itself (pythonFor).
func (m *Module) pythonNow() string {
	if p := m.resolved.Load(); p != nil {
		return *p
	}
	return m.Python
}

// pythonFor is the interpreter to start in env: the one env says it runs
// code with (a container may know better), else the configured one. A
// host Environment made before python answered (pythonNow) runs the
// answer.
func (m *Module) pythonFor(env environment.Environment) string {
	if pi, ok := env.(environment.PythonInterpreter); ok {
		p := pi.Python()
		if _, host := env.(*environment.LocalEnvironment); host && p == m.Python {
			return m.python()
		}
		if p != "" {
			return p
		}
	}
	return m.python()
}

var (
	_ app.Module       = (*Module)(nil)
	_ app.Provisioner  = (*Module)(nil)
	_ app.CleanerUpper = (*Module)(nil)
)
