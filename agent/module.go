package agent

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

func init() { app.RegisterModule(new(Module)) }

// Module is the agent as an App module "agent": it decodes the [agent]
// table, reads the BUB_* variables (LoadSettings), builds the App's Agent
// and contributes the agent_run and subagent tools with a filter that
// shows them only where they can work. Commands reach it with FromApp.
type Module struct {
	// Config is the [agent] table as decoded.
	Config

	app   *app.App
	agent atomic.Pointer[Agent]
}

// BubModule registers the module as "agent", configured by [agent].
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "agent", Config: "agent", New: func() app.Module { return new(Module) }}
}

// Provision loads the settings, builds the Agent over a and contributes
// the tools and their filter.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	m.app = a
	if err := checkPrefix(m.CommandPrefix); err != nil {
		return a.Config().Fail(err.Error(), "agent", "command_prefix")
	}
	s, err := LoadSettings(m.Config, a.Getenv)
	if err != nil {
		return err
	}
	m.agent.Store(New(a, &Options{Settings: s}))
	for _, t := range []*registry.Tool{m.subagentTool(), m.agentRunTool()} {
		if err := a.RegisterTool(t); err != nil {
			return err
		}
	}
	a.AddFilter(m.filter)
	return nil
}

// Validate refuses negative limits in [agent], naming the file and line;
// zero means the default.
func (m *Module) Validate() error {
	for _, f := range []struct {
		key string
		v   int
	}{{"max_steps", m.MaxSteps}, {"max_tokens", m.MaxTokens}, {"timeout_seconds", m.TimeoutSeconds}} {
		if f.v < 0 {
			return m.app.Config().Fail("must be >= 0", "agent", f.key)
		}
	}
	return nil
}

// Agent returns the Agent the module's tools run turns with.
func (m *Module) Agent() *Agent { return m.agent.Load() }

// Configure replaces the module's Agent with New(App, opts) and returns
// it, for callers that know more than bub.toml and the environment: the
// CLI's --model, tests' fake model clients (Options.NewClient). The
// options replace the loaded ones entirely, as New's do, so start from
// Agent().Settings() to keep them. Call it after app.New and before the
// App serves or runs turns: turns already running keep the old Agent,
// and Views already built keep the tools the old settings showed.
func (m *Module) Configure(opts *Options) *Agent {
	a := New(m.app, opts)
	m.agent.Store(a)
	return a
}

// FromApp returns the agent module a loaded.
func FromApp(a *app.App) (*Module, error) {
	mod, ok := a.Module("agent")
	if !ok {
		return nil, errors.New(`agent: the "agent" module is not loaded (app.Options.Modules leaves it out)`)
	}
	m, ok := mod.(*Module)
	if !ok {
		return nil, errors.New(`agent: module "agent" is not the agent package's`)
	}
	return m, nil
}

// filter shows the agent's tools only where they can work: agent_run to
// connections (not the agent's own) whose profile sets agent = true when
// a model is configured; subagent to the agent's own turns, and to those
// profiles when a model is configured.
func (m *Module) filter(ctx context.Context, conn *providers.Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
	configured := m.Agent().Settings().Model != ""
	profileAgent := false
	if p, ok := m.app.Config().Profiles[conn.Profile]; ok {
		profileAgent = p.Agent
	}
	out := tools[:0:0]
	for _, t := range tools {
		switch t.Name {
		case AgentRunName:
			if configured && profileAgent && conn.Transport != "agent" {
				out = append(out, t)
			}
		case SubagentName:
			// The agent's own turns always have a model (--model may
			// name one the settings lack).
			if conn.Transport == "agent" || (configured && profileAgent) {
				out = append(out, t)
			}
		default:
			out = append(out, t)
		}
	}
	return out, "", nil
}

// Interface guards: the App finds these by assertion.
var (
	_ app.Provisioner = (*Module)(nil)
	_ app.Validator   = (*Module)(nil)
)
