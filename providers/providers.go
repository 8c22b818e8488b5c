// Package providers decides what each connection sees. A Connection says who
// is asking; a chain of Providers turns the registry's tools into a View: the
// tools that connection may list and call, and the instructions that go with
// them. The same View answers tools/list and gates tools/call, so a hidden
// tool cannot be called under any name.
//
// Views depend only on the Connection (profile, principal, session key and
// the session's persisted settings), never on earlier calls, so they are
// cached and any replica gives the same answer.
package providers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/registry"
)

// Connection identifies a client for the purpose of choosing its tools.
type Connection struct {
	// Transport is "stdio", "http", "agent" or "cli".
	Transport string
	// Profile names the bub.toml profile in force.
	Profile string
	// Principal is who authenticated (a token's name), empty when anonymous.
	Principal string
	// SessionKey is the Bub session whose tape and settings the connection
	// uses.
	SessionKey string
	// Workspace is the directory tools work in.
	Workspace string
	// CodeMode is the session's code-mode switch (or the profile default).
	CodeMode bool
	// ClientName and ClientVersion come from the client's initialize
	// request; informational only (they never change the View).
	ClientName    string
	ClientVersion string
}

// viewKey is the cache key of the View a connection gets: every field a
// provider may depend on, and nothing it may not. A comparable struct, so a
// lookup builds no string.
type viewKey struct {
	transport, profile, principal, sessionKey, workspace string
	codeMode                                             bool
}

func (c *Connection) key() viewKey {
	return viewKey{c.Transport, c.Profile, c.Principal, c.SessionKey, c.Workspace, c.CodeMode}
}

// Provider prepares the tools for a connection, Bub's tool_providers: it
// receives the tools in scope so far and returns the tools to keep (it may
// drop, reorder or substitute copies with other descriptions) and a prompt
// fragment for the connection's instructions. Providers never register
// tools.
type Provider func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error)

// CodeModeFunc splits the final tools for code mode: direct tools (what the
// model sees) and code tools (reachable only inside run_code), plus a prompt
// fragment. It runs last, as Bub's CodeModeCatalog does.
type CodeModeFunc func(ctx context.Context, conn *Connection, tools []*registry.Tool) (direct, code []*registry.Tool, prompt string, err error)

// View is what one connection sees.
type View struct {
	// Tools are the directly callable tools, sorted by runtime name.
	Tools []*registry.Tool
	// CodeTools are reachable only from run_code (empty unless code mode is
	// active).
	CodeTools []*registry.Tool
	// Instructions join the providers' prompt fragments.
	Instructions string

	direct map[string]*registry.Tool
	code   map[string]*registry.Tool
}

func newView(tools, code []*registry.Tool, prompts []string) *View {
	v := &View{Tools: sortTools(tools), CodeTools: sortTools(code), direct: index(tools), code: index(code)}
	var parts []string
	for _, p := range prompts {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	v.Instructions = strings.Join(parts, "\n\n")
	return v
}

func sortTools(ts []*registry.Tool) []*registry.Tool {
	out := append([]*registry.Tool(nil), ts...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func index(ts []*registry.Tool) map[string]*registry.Tool {
	m := make(map[string]*registry.Tool, 2*len(ts))
	for _, t := range ts {
		m[strings.ToLower(t.Name)] = t
		m[strings.ToLower(t.ModelName())] = t
	}
	return m
}

// Lookup finds a directly callable tool by model or runtime name.
func (v *View) Lookup(name string) (*registry.Tool, bool) {
	t, ok := v.direct[strings.ToLower(strings.TrimSpace(name))]
	return t, ok
}

// LookupCode finds a tool callable from run_code, by model or runtime name.
func (v *View) LookupCode(name string) (*registry.Tool, bool) {
	t, ok := v.code[strings.ToLower(strings.TrimSpace(name))]
	return t, ok
}

// Chain builds Views from a registry. It is safe for concurrent use; Views
// are cached per connection key until Reset.
type Chain struct {
	reg       *registry.Registry
	providers []Provider
	codeMode  CodeModeFunc

	mu    sync.Mutex
	cache map[viewKey]*View
}

// ChainOptions configure a Chain. Nil providers are skipped.
type ChainOptions struct {
	// Providers run in order on the registry's agent-visible tools.
	Providers []Provider
	// CodeMode, when set, runs last.
	CodeMode CodeModeFunc
}

// NewChain returns a Chain over reg.
func NewChain(reg *registry.Registry, opts *ChainOptions) *Chain {
	c := &Chain{reg: reg, cache: map[viewKey]*View{}}
	if opts != nil {
		for _, p := range opts.Providers {
			if p != nil {
				c.providers = append(c.providers, p)
			}
		}
		c.codeMode = opts.CodeMode
	}
	return c
}

// View returns the connection's View, building it on first use.
func (c *Chain) View(ctx context.Context, conn *Connection) (*View, error) {
	key := conn.key()
	c.mu.Lock()
	v, ok := c.cache[key]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := c.Build(ctx, conn)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if old, ok := c.cache[key]; ok {
		v = old
	} else {
		c.cache[key] = v
	}
	c.mu.Unlock()
	return v, nil
}

// Build computes a View without the cache.
func (c *Chain) Build(ctx context.Context, conn *Connection) (*View, error) {
	var tools []*registry.Tool
	for _, t := range c.reg.Tools() {
		if t.AgentUse() { // command-only tools never reach a model
			tools = append(tools, t)
		}
	}
	var prompts []string
	for i, p := range c.providers {
		out, prompt, err := p(ctx, conn, tools)
		if err != nil {
			return nil, fmt.Errorf("providers: provider %d: %w", i, err)
		}
		tools = out
		prompts = append(prompts, prompt)
	}
	var code []*registry.Tool
	if c.codeMode != nil {
		direct, ct, prompt, err := c.codeMode(ctx, conn, tools)
		if err != nil {
			return nil, fmt.Errorf("providers: code mode: %w", err)
		}
		tools, code = direct, ct
		prompts = append(prompts, prompt)
	}
	return newView(tools, code, prompts), nil
}

// Reset drops every cached View; call it when configuration changes.
func (c *Chain) Reset() {
	c.mu.Lock()
	c.cache = map[viewKey]*View{}
	c.mu.Unlock()
}
