package app

import (
	"errors"
	"fmt"
	"sync"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// dynamicTools is the part of an App that lets tools come and go while it
// runs: upstream MCP servers connect late, restart and change their tool
// lists. Everything else in the App is fixed once New returns.
type dynamicTools struct {
	mu        sync.Mutex
	enabled   bool             // a module said its tools change (set during Provision)
	chain     *providers.Chain // nil while provisioning: no View is cached yet
	listeners []func()
}

// EnableToolChanges declares, during Provision, that the module's tools
// change while the App runs (UpdateTools), so transports advertise tool
// list changes and subscribe to them.
func (a *App) EnableToolChanges() {
	a.mustProvision("EnableToolChanges")
	a.dyn.mu.Lock()
	a.dyn.enabled = true
	a.dyn.mu.Unlock()
}

// ToolsChangeable reports whether any module declared changing tools.
func (a *App) ToolsChangeable() bool {
	a.dyn.mu.Lock()
	defer a.dyn.mu.Unlock()
	return a.dyn.enabled
}

// OnToolsChanged calls f (on the updater's goroutine, after the change is
// visible in every View) each time UpdateTools changed the registry.
// Transports use it to sync their tool tables and tell clients.
func (a *App) OnToolsChanged(f func()) {
	a.dyn.mu.Lock()
	a.dyn.listeners = append(a.dyn.listeners, f)
	a.dyn.mu.Unlock()
}

// UpdateTools removes the tools named in remove (runtime names; missing
// ones are ignored) and registers add, as one change: when one of add
// clashes with a tool that stays, nothing changes and the error names
// both. It may be called at any time, from any goroutine, by a module
// that declared EnableToolChanges; the cached Views are dropped and the
// OnToolsChanged listeners told.
func (a *App) UpdateTools(remove []string, add []*registry.Tool) error {
	a.dyn.mu.Lock()
	if !a.dyn.enabled {
		a.dyn.mu.Unlock()
		return errors.New("app: UpdateTools without EnableToolChanges in Provision")
	}
	removed := map[string]*registry.Tool{}
	for _, name := range remove {
		if t, err := a.reg.Lookup(name); err == nil && t.Name == name && a.reg.Unregister(name) {
			removed[name] = t
		}
	}
	var done []string
	var err error
	for _, t := range add {
		if err = a.reg.Register(t); err != nil {
			break
		}
		done = append(done, t.Name)
	}
	if err != nil {
		for _, n := range done {
			a.reg.Unregister(n)
		}
		for _, t := range removed {
			if rerr := a.reg.Register(t); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}
	chain := a.dyn.chain
	listeners := append([]func(){}, a.dyn.listeners...)
	a.dyn.mu.Unlock()
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	if chain != nil {
		chain.Reset()
	}
	for _, f := range listeners {
		f()
	}
	return nil
}

// viewsBuilt hands the finished View chain to UpdateTools.
func (a *App) viewsBuilt(c *providers.Chain) {
	a.dyn.mu.Lock()
	a.dyn.chain = c
	a.dyn.mu.Unlock()
}

// loadedTools names the deferred tools the connection's session loaded.
func (a *App) loadedTools(conn *providers.Connection) []string {
	sess, err := a.Session(conn)
	if err != nil {
		return nil
	}
	return sess.Settings().LoadedTools
}

// LoadTools records in the caller's session that it loaded the deferred
// tools names (runtime names) and tells the App: its Views are rebuilt,
// and the OnToolsChanged listeners told, so clients list the tools from
// now on. tool.describe and tool_search call it.
func (a *App) LoadTools(sess registry.Session, conn *providers.Connection, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if err := sess.LoadTools(names); err != nil {
		return fmt.Errorf("record the loaded tools: %w", err)
	}
	a.chain.Forget(conn.SessionKey)
	a.dyn.mu.Lock()
	listeners := append([]func(){}, a.dyn.listeners...)
	a.dyn.mu.Unlock()
	for _, f := range listeners {
		f()
	}
	return nil
}
