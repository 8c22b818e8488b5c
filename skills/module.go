package skills

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/bubbuild/bub-mcp/app"
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

	mu     sync.Mutex
	warned map[string]bool
}

// BubModule registers the module as "skills".
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "skills", New: func() app.Module { return new(Module) }}
}

// Provision contributes the skill tool and logs to the App's logger.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	m.log = a.Logger()
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
