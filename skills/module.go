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
// long-running server warns once per directory, not once per call. Its
// configuration is the [skills] table (see Config). The zero value is
// usable (it logs to slog.Default() and expands no ${config.*}).
type Module struct {
	log  *slog.Logger
	app  *app.App // nil for the zero Module: no configuration, no profiles
	vars Vars

	mu     sync.Mutex
	warned map[string]bool

	digests digestCache // file digests for skills over MCP (mcp.go)
}

// BubModule registers the module as "skills".
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "skills", New: func() app.Module { return new(Module) }}
}

// Config is the [skills] table of bub.toml.
type Config struct {
	// Vars are the only values a skill's ${config.<name>} may expand:
	// ${config.team} reads [skills.vars] team, ${config.a.b} reads
	// [skills.vars.a] b. A SKILL.md is text anyone with fs.write (or bash)
	// can plant, and what it expands goes back to the client, so nothing
	// else of bub.toml (state key, store DSN, upstream tokens) is ever
	// reachable from a skill.
	Vars Vars `toml:"vars"`
}

// Vars is the [skills.vars] table as TOML values (strings, int64,
// float64, bool, times, arrays and nested tables).
type Vars map[string]any

// UnmarshalTOML keeps the table whole, nested tables included, and makes
// the TOML decoder count every key under it as known.
func (v *Vars) UnmarshalTOML(data any) error {
	t, ok := data.(map[string]any)
	if !ok {
		return fmt.Errorf("skills.vars: want a table, not %T", data)
	}
	*v = t
	return nil
}

// Provision decodes [skills], contributes the skill tool and logs to the
// App's logger.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	var c Config
	if err := a.Config().Decode("skills", &c); err != nil {
		return err
	}
	m.log = a.Logger()
	m.app = a
	m.vars = c.Vars
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

// Body renders s's instructions (Skill.Body) with ${config.a.b} filled
// in from [skills.vars]. A name that is not there stays as written, and
// one note after the body lists those names, so the model (and the skill's
// author) sees what was not expanded; the note is the same whether or not
// bub.toml has such a setting elsewhere.
func (m *Module) Body(s Skill, python string) string {
	if m.app == nil {
		return s.Body(python)
	}
	text, missing := s.render(python, m.variable)
	if len(missing) == 0 {
		return text
	}
	if m.firstWarning("vars:" + s.Location) {
		m.logger().Warn("skills.vars_missing", "skill", s.Name, "path", s.Location, "names", missing,
			"hint", "only [skills.vars] of bub.toml expands in skills")
	}
	refs := make([]string, len(missing))
	for i, n := range missing {
		refs[i] = "${config." + n + "}"
	}
	return text + "\n\n(not expanded: " + strings.Join(refs, ", ") + "; a skill may only use the [skills.vars] the operator set in bub.toml)"
}

// variable finds a dotted name in [skills.vars].
func (m *Module) variable(name string) (any, bool) {
	var v any = map[string]any(m.vars)
	for k := range strings.SplitSeq(name, ".") {
		t, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = t[k]; !ok {
			return nil, false
		}
	}
	return v, true
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
