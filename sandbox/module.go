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
		pol, err := policy(cfg, p.Sandbox, "profiles", name, "sandbox")
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
		if err := checkBwrap(cfg, m.Bwrap, fmt.Sprintf("profile %q runs in the sandbox", used), "profiles", used, "environment"); err != nil {
			return err
		}
	}
	a.ConfigureEnvironment(func(conn *providers.Connection, o *environment.Options) {
		o.Sandbox = m.policies[conn.Profile]
		o.PythonCache = m.pythons
	})
	return nil
}

// Policy checks a sandbox table of bub.toml other than a profile's (an
// upstream server's [upstreams.<name>.sandbox]) at the key path table,
// and returns it as a policy with the [sandbox] table's bwrap, which it
// checks is installed: a missing bwrap fails at start, naming the key,
// rather than at the server's first start. A nil table means the
// defaults. user says who runs in the sandbox, for the message.
func Policy(cfg *config.Config, s *config.Sandbox, user string, table ...string) (environment.SandboxPolicy, error) {
	var top Module
	if err := cfg.Decode("sandbox", &top); err != nil {
		return environment.SandboxPolicy{}, err
	}
	pol, err := policy(cfg, s, table...)
	if err != nil {
		return environment.SandboxPolicy{}, err
	}
	pol.Bwrap = top.Bwrap
	// The key that chose the sandbox: the table's sibling "environment".
	envKey := append(append([]string(nil), table[:len(table)-1]...), "environment")
	if err := checkBwrap(cfg, top.Bwrap, user+" runs in the sandbox", envKey...); err != nil {
		return environment.SandboxPolicy{}, err
	}
	return pol, nil
}

// checkBwrap fails, naming [sandbox] bwrap when it is set and else the
// key that asked for the sandbox, when bubblewrap is not installed.
func checkBwrap(cfg *config.Config, bwrap, who string, key ...string) error {
	bw := bwrap
	if bw == "" {
		bw = environment.DefaultBwrap
	}
	if _, err := exec.LookPath(bw); err != nil {
		if bwrap != "" {
			key = []string{"sandbox", "bwrap"}
		}
		return cfg.Fail(fmt.Sprintf("%s, which needs bubblewrap: %q not found (install the bubblewrap package, e.g. apt-get install -y bubblewrap, or set [sandbox] bwrap)", who, bw), key...)
	}
	return nil
}

// policy checks a sandbox table at the key path table; nil means the
// defaults.
func policy(cfg *config.Config, s *config.Sandbox, table ...string) (environment.SandboxPolicy, error) {
	if s == nil {
		return environment.SandboxPolicy{}, nil
	}
	key := func(k string) []string { return append(append([]string(nil), table...), k) }
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
