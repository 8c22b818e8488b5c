// Package sandbox is the module that configures the "sandbox"
// environment (environment.SandboxEnvironment, on bubblewrap): the
// [sandbox] table names the bwrap binary, and each profile's
// [profiles.<name>.sandbox] table its limits and mounts. It checks them at
// start, so a missing bwrap or a bad limit fails there, naming the key,
// instead of at a session's first tool call.
//
// Enable it with a blank import, as cli does:
//
//	import _ "github.com/bubbuild/bub-mcp/sandbox"
package sandbox

import (
	"context"
	"fmt"
	"os/exec"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/providers"
)

func init() {
	app.RegisterModule(new(Module))
}

// Module holds the sandbox policies of one App's profiles. Its exported
// fields are the [sandbox] table of bub.toml.
type Module struct {
	// Bwrap is the bubblewrap binary; empty means environment.DefaultBwrap
	// looked up in PATH.
	Bwrap string `toml:"bwrap"`

	policies map[string]environment.SandboxPolicy // by profile
	// pythons is where Python lives, asked once per App for all its
	// sessions' sandboxes, and not shared with another App.
	pythons *environment.PythonCache
}

// BubModule registers the module as "sandbox", configured by [sandbox].
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "sandbox", Config: "sandbox", New: func() app.Module { return new(Module) }}
}

// Provision turns every profile's sandbox table into a policy, checks it,
// and, when some profile runs in the sandbox, that bwrap is there.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	cfg := a.Config()
	m.policies = map[string]environment.SandboxPolicy{}
	m.pythons = environment.NewPythonCache(0)
	used := ""
	for _, name := range cfg.ProfileNames() {
		p := cfg.Profiles[name]
		pol, err := policy(cfg, name, p.Sandbox)
		if err != nil {
			return err
		}
		pol.Bwrap = m.Bwrap
		m.policies[name] = pol
		if p.Environment == environment.SandboxName && used == "" {
			used = name
		}
	}
	if used != "" {
		bw := m.Bwrap
		if bw == "" {
			bw = environment.DefaultBwrap
		}
		if _, err := exec.LookPath(bw); err != nil {
			key := []string{"profiles", used, "environment"}
			if m.Bwrap != "" {
				key = []string{"sandbox", "bwrap"}
			}
			return cfg.Fail(fmt.Sprintf("profile %q runs in the sandbox, which needs bubblewrap: %q not found (install the bubblewrap package, e.g. apt-get install -y bubblewrap, or set [sandbox] bwrap)", used, bw), key...)
		}
	}
	a.ConfigureEnvironment(func(conn *providers.Connection, o *environment.Options) {
		o.Sandbox = m.policies[conn.Profile]
		o.PythonCache = m.pythons
	})
	return nil
}

// policy checks a profile's sandbox table; nil means the defaults.
func policy(cfg *config.Config, profile string, s *config.Sandbox) (environment.SandboxPolicy, error) {
	if s == nil {
		return environment.SandboxPolicy{}, nil
	}
	key := func(k string) []string { return []string{"profiles", profile, "sandbox", k} }
	switch s.Network {
	case "", environment.NetworkNone, environment.NetworkHost:
	default:
		return environment.SandboxPolicy{}, cfg.Fail(fmt.Sprintf("must be %q or %q", environment.NetworkNone, environment.NetworkHost), key("network")...)
	}
	if s.CPUSeconds < 0 {
		return environment.SandboxPolicy{}, cfg.Fail("must be >= 0", key("cpu_seconds")...)
	}
	if s.Processes < 0 {
		return environment.SandboxPolicy{}, cfg.Fail("must be >= 0", key("processes")...)
	}
	if s.Memory > 0 && s.Memory < 16<<20 {
		return environment.SandboxPolicy{}, cfg.Fail("must be at least 16MiB (a shell needs that much address space), or 0 for no limit", key("memory")...)
	}
	return environment.SandboxPolicy{
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
	_ app.Module      = (*Module)(nil)
	_ app.Provisioner = (*Module)(nil)
)
