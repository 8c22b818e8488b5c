package skills

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/providers"
)

func init() {
	app.RegisterModule(new(Module))
}

// maxWarned bounds the legacy directories a Module remembers warning
// about; past it, it forgets them and may warn again.
const maxWarned = 1024

// Module is the skills of one App: it contributes the skill tool and
// remembers which legacy skill directories it already warned about, so a
// long-running server warns once per directory, not once per call. It has
// no configuration. The zero value is usable (it logs to slog.Default()).
type Module struct {
	log *slog.Logger
	app *app.App // nil for the zero Module: no configuration, no profiles

	mu     sync.Mutex
	warned map[string]bool

	digests digestCache // file digests for skills over MCP (mcp.go)
}

// BubModule registers the module as "skills".
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "skills", New: func() app.Module { return new(Module) }}
}

// Provision contributes the skill tool and logs to the App's logger.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	m.log = a.Logger()
	m.app = a
	if err := a.RegisterTool(m.Tool()); err != nil {
		return fmt.Errorf("skills: %w", err)
	}
	return nil
}

// Discover is DiscoverSkills, warning about a legacy directory only the
// first time m sees it.
func (m *Module) Discover(workspace string) []Skill {
	return discover(workspace, m.logger(), m.firstWarning)
}

// For returns the skills a connection may use: Discover of its
// workspace, without the skills whose folder resolves outside the
// workspace when its profile is confined to it.
func (m *Module) For(conn *providers.Connection) []Skill {
	skills := m.Discover(conn.Workspace)
	if m.confined(conn.Profile) {
		skills = Confined(skills, conn.Workspace)
	}
	return skills
}

func (m *Module) confined(profile string) bool {
	if m.app == nil {
		return false
	}
	p, err := m.app.Profile(profile)
	return err == nil && p.Confine
}

// Body renders s's instructions (Skill.Body) with ${config.a.b} filled in
// from the App's bub.toml.
func (m *Module) Body(s Skill, python string) string {
	if m.app == nil {
		return s.Body(python)
	}
	return s.render(python, m.app.Config().Value)
}

// PromptFor is the skills prompt of a turn on conn: the skills it may use
// (those in allowed when it is not nil, case-insensitively), with the
// bodies of those the prompt names as $name inlined, as Bub's agent does.
func (m *Module) PromptFor(conn *providers.Connection, prompt string, allowed []string, python string) string {
	var some []Skill
	for _, s := range m.For(conn) {
		if allowed == nil || slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, s.Name) }) {
			some = append(some, s)
		}
	}
	bodies := map[string]string{}
	for _, s := range some {
		if Hinted(prompt, []Skill{s})[s.Name] {
			bodies[s.Name] = m.Body(s, python)
		}
	}
	return FormatExpanded(some, bodies)
}

// Prompt is the package's Prompt, discovering through m.
func (m *Module) Prompt(workspace string) string {
	return FormatSkills(m.Discover(workspace))
}

func (m *Module) logger() *slog.Logger {
	if m.log == nil {
		return slog.Default()
	}
	return m.log
}

// firstWarning reports whether dir was not warned about yet, and
// remembers it.
func (m *Module) firstWarning(dir string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.warned[dir] {
		return false
	}
	if m.warned == nil || len(m.warned) >= maxWarned {
		m.warned = map[string]bool{}
	}
	m.warned[dir] = true
	return true
}

var (
	_ app.Module      = (*Module)(nil)
	_ app.Provisioner = (*Module)(nil)
)
