// Package sandbox is the module environment.sandbox: the Environment on
// bubblewrap (environment.SandboxEnvironment), configured by its own keys
// in the table that picks it,
//
//	[profiles.<name>.environment]
//	kind = "sandbox"
//	memory = "256MiB"
//	network = "none"
//
// with [sandbox] holding defaults for every use (bwrap, say). It checks
// them at start, so a missing bwrap or a bad limit fails there, naming
// the key, instead of at a session's first tool call. The spelling
// before modules were namespaced, environment = "sandbox" with the keys
// in [profiles.<name>.sandbox], reads the same.
//
// Enable it with a blank import, as modules/standard does:
//
//	import _ "github.com/bubbuild/bub-mcp/sandbox"
package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"reflect"
	"strings"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
)

func init() {
	app.RegisterModule(new(Environment))
}

// Config is the sandbox's keys. Zero values mean no limit, no network
// and no extra paths.
type Config struct {
	// Bwrap is the bubblewrap binary; empty means environment.DefaultBwrap
	// looked up in PATH.
	Bwrap string `toml:"bwrap"`
	// Memory is each process's address-space limit, e.g. "256MiB".
	Memory config.Size `toml:"memory"`
	// CPUSeconds is each process's CPU-time limit.
	CPUSeconds int64 `toml:"cpu_seconds"`
	// Processes bounds the processes of one spawned tree.
	Processes int `toml:"processes"`
	// FileSize is the largest file a process may write, e.g. "100MiB".
	FileSize config.Size `toml:"file_size"`
	// Network is "none" (the default) or "host".
	Network string `toml:"network"`
	// ReadOnly and ReadWrite are extra host paths visible inside;
	// relative ones resolve against the workspace.
	ReadOnly  []string `toml:"read_only"`
	ReadWrite []string `toml:"read_write"`
}

// Environment is the module environment.sandbox, one instance per use (a
// profile's environment, an upstream server's). Its Config is decoded from
// [sandbox] and then from the use's own table.
type Environment struct {
	Config

	policy environment.SandboxPolicy
	// pythons is where Python lives, asked once per use for all its
	// sessions' sandboxes, and not shared with another App.
	pythons *environment.PythonCache
}

// BubModule registers the module as environment.sandbox, with [sandbox]
// as the defaults of every use.
func (*Environment) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: environment.Namespace + "." + environment.SandboxName, Config: "sandbox", New: func() app.Module { return new(Environment) }}
}

// ProvisionUse checks the keys and that bwrap is installed, naming the key
// at fault.
func (m *Environment) ProvisionUse(ctx context.Context, a *app.App, at *config.ModuleRef) error {
	return m.provision(at)
}

func (m *Environment) provision(at *config.ModuleRef) error {
	pol, err := m.Config.policy(at)
	if err != nil {
		return err
	}
	m.policy = pol
	m.pythons = environment.NewPythonCache(0)
	bw := m.Bwrap
	if bw == "" {
		bw = environment.DefaultBwrap
	}
	if _, err := exec.LookPath(bw); err != nil {
		msg := fmt.Sprintf("%s runs in the sandbox, which needs bubblewrap: %q not found (install the bubblewrap package, e.g. apt-get install -y bubblewrap, or set bwrap)", user(at), bw)
		cfg := at.Config()
		switch {
		case m.Bwrap != "" && cfg.IsDefined(append(append([]string(nil), at.Table...), "bwrap")...):
			return at.Fail(msg, "bwrap")
		case m.Bwrap != "":
			return cfg.Fail(msg, "sandbox", "bwrap")
		}
		return at.FailKind(msg)
	}
	return nil
}

// user names who runs in the sandbox configured at at, for messages:
// `profile "p"` for [profiles.p.environment].
func user(at *config.ModuleRef) string {
	if t := at.Table; len(t) == 3 {
		return fmt.Sprintf("%s %q", strings.TrimSuffix(t[0], "s"), t[1])
	}
	return "[" + strings.Join(at.Table, ".") + "]"
}

// NewEnvironment makes a session's sandbox with the use's policy.
func (m *Environment) NewEnvironment(ctx context.Context, o environment.Options) (environment.Environment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return environment.NewSandbox(&environment.SandboxOptions{Workspace: o.Workspace, AllowPaths: o.AllowPaths, Hidden: o.Hidden, Python: o.Python,
		Policy: m.policy, PythonCache: m.pythons})
}

// Policy checks a sandbox table of bub.toml that is not a module's use
// (an upstream server's [upstreams.<name>.sandbox], s nil when absent) at
// at, with [sandbox] as defaults, and returns the environment.sandbox
// module it configures, ready to make Environments. A missing bwrap
// fails at start, naming the key, rather than at the server's first
// start.
func Policy(at *config.ModuleRef, s *Config) (*Environment, error) {
	m := new(Environment)
	if err := at.Config().Decode("sandbox", m); err != nil {
		return nil, err
	}
	if s != nil {
		// Key by key, as a profile's own table overrides [sandbox]: only
		// the keys the server's table sets replace the defaults.
		set := func(key string) bool {
			return at.Config().IsDefined(append(append([]string(nil), at.Table...), key)...)
		}
		dst, src := reflect.ValueOf(&m.Config).Elem(), reflect.ValueOf(s).Elem()
		for i := range dst.NumField() {
			if set(dst.Type().Field(i).Tag.Get("toml")) {
				dst.Field(i).Set(src.Field(i))
			}
		}
	}
	if err := m.provision(at); err != nil {
		return nil, err
	}
	return m, nil
}

// policy checks the keys; at names their table.
func (s *Config) policy(at *config.ModuleRef) (environment.SandboxPolicy, error) {
	switch s.Network {
	case "", environment.NetworkNone, environment.NetworkHost:
	default:
		return environment.SandboxPolicy{}, at.Fail(fmt.Sprintf("must be %q or %q", environment.NetworkNone, environment.NetworkHost), "network")
	}
	if s.CPUSeconds < 0 {
		return environment.SandboxPolicy{}, at.Fail("must be >= 0", "cpu_seconds")
	}
	if s.Processes < 0 {
		return environment.SandboxPolicy{}, at.Fail("must be >= 0", "processes")
	}
	if s.Memory > 0 && s.Memory < 16<<20 {
		return environment.SandboxPolicy{}, at.Fail("must be at least 16MiB (a shell needs that much address space), or 0 for no limit", "memory")
	}
	return environment.SandboxPolicy{
		Bwrap:      s.Bwrap,
		Network:    s.Network,
		ReadOnly:   s.ReadOnly,
		ReadWrite:  s.ReadWrite,
		Memory:     int64(s.Memory),
		CPUSeconds: s.CPUSeconds,
		Processes:  s.Processes,
		FileSize:   int64(s.FileSize),
	}, nil
}

var (
	_ environment.Module = (*Environment)(nil)
	_ app.UseProvisioner = (*Environment)(nil)
)
