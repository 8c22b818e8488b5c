package builtin

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/registry"
)

func init() {
	app.RegisterModule(new(Module))
}

// Module is the builtin tools of one App. Its exported fields are the
// [web] table of bub.toml; the rest is what the tools keep between calls
// (background shells, web connections), so that it ends with the App
// that made it. The zero value is usable: a test builds a literal Module
// and calls Tools. Its fields must not change once Tools was called.
type Module struct {
	// AllowLoopback lets web.fetch connect to loopback, private and
	// link-local addresses (127.0.0.1, 10.0.0.0/8, 169.254.169.254, ::1,
	// ...). Off by default, so a model cannot reach services that trust
	// the local network, such as cloud metadata endpoints.
	// BUB_WEB_ALLOW_LOOPBACK overrides it.
	AllowLoopback bool `toml:"allow_loopback"`
	// MaxBytes caps the body web.fetch reads; a larger response is
	// refused. Zero means DefaultWebMaxBytes; a negative value is refused
	// by Provision.
	MaxBytes int64 `toml:"max_bytes"`
	// MaxHTMLBytes caps how much of an HTML page web.fetch converts to
	// Markdown; the rest is left out with a note. Zero means
	// DefaultMaxHTMLBytes; a negative value is refused by Provision.
	MaxHTMLBytes int64 `toml:"max_html_bytes"`

	shells shellTable

	webMu     sync.Mutex
	transport *http.Transport // made on first fetch, closed by Cleanup
}

// BubModule registers the module as "builtin", configured by [web].
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "builtin", Config: "web", New: func() app.Module { return new(Module) }}
}

// Provision checks the [web] settings, applies BUB_WEB_ALLOW_LOOPBACK
// (which wins over allow_loopback, so one run can open the local network
// without editing bub.toml) and contributes the tools.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	if m.MaxBytes < 0 {
		return a.Config().Fail("must be >= 0", "web", "max_bytes")
	}
	if m.MaxHTMLBytes < 0 {
		return a.Config().Fail("must be >= 0", "web", "max_html_bytes")
	}
	if err := m.applyEnv(a.Getenv); err != nil {
		return err
	}
	m.shells.replica = a.Replica()
	for _, t := range m.Tools() {
		if err := a.RegisterTool(t); err != nil {
			return fmt.Errorf("builtin: %w", err)
		}
	}
	return nil
}

// applyEnv applies BUB_WEB_ALLOW_LOOPBACK, read with getenv: set, it wins
// over allow_loopback; empty, it changes nothing.
func (m *Module) applyEnv(getenv func(string) string) error {
	if v := getenv("BUB_WEB_ALLOW_LOOPBACK"); v != "" {
		allow, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("BUB_WEB_ALLOW_LOOPBACK=%q: want true or false", v)
		}
		m.AllowLoopback = allow
	}
	return nil
}

// Tools returns new builtin tools bound to m: their shells and settings
// are m's. Provision registers them; tests call it directly.
func (m *Module) Tools() []*registry.Tool {
	ts := []*registry.Tool{
		m.bashTool(), m.bashOutputTool(), m.bashKillTool(), m.bashInputTool(),
		fsReadTool(), fsWriteTool(), fsEditTool(), fsGrepTool(DefaultRipgrep), fsGlobTool(),
		tapeInfoTool(), tapeSearchTool(), tapeAnchorsTool(), tapeHandoffTool(), tapeResetTool(),
		m.webFetchTool(),
	}
	for _, t := range ts {
		if t.Preserve {
			// Preserved tools answer models in text (Bub: "they return plain
			// text"); they are never in the code-mode stub, so an output
			// schema would only make MCP clients receive the structured
			// value next to the text, in full even when the text was
			// spilled. Go callers still get the structured value.
			t.OutputSchema = nil
		}
	}
	return ts
}

// Cleanup kills the shells that are still running and forgets them all,
// so nothing the App's tools started outlives it, and drops idle web
// connections. It copes with a module that was never provisioned.
func (m *Module) Cleanup() error {
	m.shells.close()
	m.webMu.Lock()
	defer m.webMu.Unlock()
	if m.transport != nil {
		m.transport.CloseIdleConnections()
	}
	return nil
}

var (
	_ app.Module       = (*Module)(nil)
	_ app.Provisioner  = (*Module)(nil)
	_ app.CleanerUpper = (*Module)(nil)
)
