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
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/internal/lockedfile"
	"github.com/bubbuild/bub-mcp/registry"
)

// Connection identifies a client for the purpose of choosing its tools.
// It is the registry's type, so that tools see the same caller
// (registry.ToolContext.Conn) that chose their View.
type Connection = registry.Connection

// viewKey is the cache key of the View a connection gets: every field a
// provider may depend on, and nothing it may not. A comparable struct, so a
// lookup builds no string.
type viewKey struct {
	transport, profile, principal, sessionKey, workspace string
	codeMode                                             bool
}

func keyOf(c *Connection) viewKey {
	return viewKey{c.Transport, c.Profile, c.Principal, c.SessionKey, c.Workspace, c.CodeMode}
}

// Provider prepares the tools for a connection, Bub's tool_providers: it
// receives the tools in scope so far and returns the tools to keep (it may
// drop, reorder or substitute copies with other descriptions) and a prompt
// fragment for the connection's instructions. Providers never register
// tools.
type Provider func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error)

// CodeModeFunc splits the tools in scope for code mode, as Bub's
// CodeModeCatalog does. It must have no side effects: files the split
// refers to go in Split.Files.
type CodeModeFunc func(ctx context.Context, conn *Connection, tools []*registry.Tool) (Split, error)

// Split is code mode's verdict on a connection's tools.
type Split struct {
	// Direct are the tools the model sees.
	Direct []*registry.Tool
	// Code are reachable only inside run_code.
	Code []*registry.Tool
	// Prompt is a fragment for the connection's instructions.
	Prompt string
	// Files are files the prompt refers to (the stub), by absolute path.
	Files map[string]string
}

// View is what one connection sees.
type View struct {
	// Tools are the directly callable tools, sorted by runtime name.
	Tools []*registry.Tool
	// CodeTools are reachable only from run_code (empty unless code mode is
	// active).
	CodeTools []*registry.Tool
	// Deferred are directly callable by name but not listed: deferred
	// tools (registry.Tool.Deferred) whose definitions the session has not
	// loaded (tool.describe). The instructions carry their catalog.
	Deferred []*registry.Tool
	// Instructions join the providers' prompt fragments.
	Instructions string
	// Files are files the View refers to (code mode's stub), by absolute
	// path. Building a View writes nothing; WriteFiles writes them when
	// the View is first handed out.
	Files map[string]string

	direct map[string]*registry.Tool
	code   map[string]*registry.Tool

	filesOnce sync.Once
	filesErr  error
	memo      sync.Map
}

// Memo returns the value kept under key for this View, computing it with
// f the first time. Transports keep their per-View work here (the MCP tool
// list), so it is freed with the View when the cache evicts it. Concurrent
// first calls may each run f; one result wins.
func (v *View) Memo(key any, f func() any) any {
	if got, ok := v.memo.Load(key); ok {
		return got
	}
	got, _ := v.memo.LoadOrStore(key, f())
	return got
}

func newView(tools, code, deferred []*registry.Tool, prompts []string, files map[string]string) *View {
	v := &View{Tools: sortTools(tools), CodeTools: sortTools(code), Deferred: sortTools(deferred), Files: files,
		direct: index(append(slices.Clip(tools), deferred...)), code: index(code)}
	var parts []string
	for _, p := range prompts {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	v.Instructions = strings.Join(parts, "\n\n")
	return v
}

// WriteFiles writes the View's Files that do not exist yet, atomically,
// once per View; later calls return the first call's error.
func (v *View) WriteFiles() error {
	v.filesOnce.Do(func() {
		var errs []error
		for path, content := range v.Files {
			if err := writeIfAbsent(path, content); err != nil {
				errs = append(errs, err)
			}
		}
		v.filesErr = errors.Join(errs...)
	})
	return v.filesErr
}

// writeIfAbsent writes content to path through a temporary file and a
// rename, so a reader never sees half a file; an existing file is kept,
// since Files are named by their content's hash.
func writeIfAbsent(path, content string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	// Private like the rest of $BUB_HOME: a stub names the tools in scope.
	if err := lockedfile.Write(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("providers: write %s: %w", path, err)
	}
	return nil
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

// DefaultMaxViews bounds a Chain's cache when ChainOptions.MaxViews is
// zero: one View per connection key, and a long-lived server sees many
// sessions come and go.
const DefaultMaxViews = 1024

// Chain builds Views from a registry. It is safe for concurrent use; Views
// are cached per connection key, up to a bound, until Reset or Forget.
type Chain struct {
	reg       *registry.Registry
	filters   []Provider
	codeMode  CodeModeFunc
	providers []Provider
	loaded    func(conn *Connection) []string
	maxViews  int

	mu    sync.Mutex
	cache map[viewKey]*View
	gen   uint64 // counts Reset and Forget: a View built across one is not cached
}

// ChainOptions configure a Chain. Nil providers are skipped.
type ChainOptions struct {
	// Filters run first, in order, on the registry's agent-visible tools:
	// the profile scope and what decides which tools are available at
	// all.
	Filters []Provider
	// CodeMode, when set, runs next: Bub "applies the current tool scope
	// and prepares code mode first".
	CodeMode CodeModeFunc
	// Providers run last, in order, on the direct tools (Bub's
	// tool_providers).
	Providers []Provider
	// MaxViews bounds the cache; zero means DefaultMaxViews.
	MaxViews int
	// Loaded names the deferred tools a connection's session loaded
	// (listed like any tool); nil means none.
	Loaded func(conn *Connection) []string
}

// NewChain returns a Chain over reg.
func NewChain(reg *registry.Registry, opts *ChainOptions) *Chain {
	c := &Chain{reg: reg, cache: map[viewKey]*View{}, maxViews: DefaultMaxViews}
	if opts != nil {
		c.filters = nonNil(opts.Filters)
		c.providers = nonNil(opts.Providers)
		c.codeMode = opts.CodeMode
		c.loaded = opts.Loaded
		if opts.MaxViews > 0 {
			c.maxViews = opts.MaxViews
		}
	}
	return c
}

func nonNil(ps []Provider) []Provider {
	var out []Provider
	for _, p := range ps {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// View returns the connection's View, building it on first use.
func (c *Chain) View(ctx context.Context, conn *Connection) (*View, error) {
	key := keyOf(conn)
	c.mu.Lock()
	v, ok := c.cache[key]
	gen := c.gen
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := c.Build(ctx, conn)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.gen != gen {
		// The tools changed while this View was built (an upstream
		// server's list): serve it this once, but do not keep it.
	} else if old, ok := c.cache[key]; ok {
		v = old
	} else {
		if len(c.cache) >= c.maxViews {
			for k := range c.cache { // evict one, any: rebuilding is cheap
				delete(c.cache, k)
				break
			}
		}
		c.cache[key] = v
	}
	c.mu.Unlock()
	return v, nil
}

// Build computes a View without the cache. It has no side effects.
func (c *Chain) Build(ctx context.Context, conn *Connection) (*View, error) {
	var tools []*registry.Tool
	for _, t := range c.reg.Tools() {
		if t.AgentUse() { // command-only tools never reach a model
			tools = append(tools, t)
		}
	}
	var prompts []string
	run := func(stage string, ps []Provider) error {
		for i, p := range ps {
			out, prompt, err := p(ctx, conn, tools)
			if err != nil {
				return fmt.Errorf("providers: %s %d: %w", stage, i, err)
			}
			tools = out
			prompts = append(prompts, prompt)
		}
		return nil
	}
	if err := run("filter", c.filters); err != nil {
		return nil, err
	}
	var (
		code  []*registry.Tool
		files map[string]string
	)
	if c.codeMode != nil {
		split, err := c.codeMode(ctx, conn, tools)
		if err != nil {
			return nil, fmt.Errorf("providers: code mode: %w", err)
		}
		tools, code, files = split.Direct, split.Code, split.Files
		prompts = append(prompts, split.Prompt)
	}
	if err := run("provider", c.providers); err != nil {
		return nil, err
	}
	tools, deferred, catalog := c.deferral(conn, tools)
	prompts = append(prompts, catalog)
	return newView(tools, code, deferred, prompts, files), nil
}

// SearchToolName is the runtime name of the tool search (package
// toolsearch): when a View lists it, the deferred tools' catalog is one
// line pointing to it instead of a line per tool.
const SearchToolName = "tool.search"

// deferral moves the deferred tools the session has not loaded out of the
// listed ones, and writes their catalog: one line each, the name and the
// description's first sentence.
func (c *Chain) deferral(conn *Connection, tools []*registry.Tool) (listed, deferred []*registry.Tool, catalog string) {
	if !slices.ContainsFunc(tools, func(t *registry.Tool) bool { return t.Deferred }) {
		return tools, nil, "" // the common case
	}
	var loaded []string
	if c.loaded != nil {
		loaded = c.loaded(conn)
	}
	listed = tools[:0:0]
	for _, t := range tools {
		if t.Deferred && !slices.Contains(loaded, t.Name) {
			deferred = append(deferred, t)
		} else {
			listed = append(listed, t)
		}
	}
	if len(deferred) == 0 {
		return listed, nil, ""
	}
	if slices.ContainsFunc(listed, func(t *registry.Tool) bool { return t.Name == SearchToolName }) {
		// tool_search finds them: one line instead of a catalog that grows
		// with every tool an upstream brings (issue 29: a catalog of
		// hundreds of tools needs no long instructions).
		return listed, deferred, fmt.Sprintf("%d more tools are available but not listed. Find them with tool_search(query=...), which returns their definitions and lists them for you; or load one by name with tool_describe(names=[...]).", len(deferred))
	}
	var b strings.Builder
	b.WriteString("More tools are available but not listed. To use one, load its definition first with tool_describe(names=[...]) (it is then listed too):")
	for _, t := range sortTools(deferred) {
		b.WriteString("\n- ")
		b.WriteString(t.ModelName())
		if s := FirstSentence(t.Description); s != "" {
			b.WriteString(": ")
			b.WriteString(s)
		}
	}
	return listed, deferred, b.String()
}

// FirstSentence is a description's first sentence (or first line), for
// one-line catalogs.
func FirstSentence(desc string) string {
	desc = strings.TrimSpace(desc)
	line, _, _ := strings.Cut(desc, "\n")
	for i := 0; i < len(line); i++ {
		if line[i] == '.' && (i+1 == len(line) || line[i+1] == ' ') {
			return line[:i+1]
		}
	}
	return strings.TrimSpace(line)
}

// Reset drops every cached View; call it when configuration changes.
func (c *Chain) Reset() {
	c.mu.Lock()
	c.cache = map[viewKey]*View{}
	c.gen++
	c.mu.Unlock()
}

// Forget drops the cached Views of one session, which ended.
func (c *Chain) Forget(sessionKey string) {
	c.mu.Lock()
	for k := range c.cache {
		if k.sessionKey == sessionKey {
			delete(c.cache, k)
		}
	}
	c.gen++
	c.mu.Unlock()
}
