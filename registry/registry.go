package registry

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/internal/textmatch"
)

// Registry holds tools and hooks. Plugins register into Default from
// init(), the database/sql driver pattern; tests build their own with New.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]registered // by runtime name
	index map[string]*Tool      // by normalized runtime and model name
	hooks []Hooks
}

// registered is a tool and the call site that registered it, which a clash
// error names.
type registered struct {
	tool *Tool
	site site
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{tools: map[string]registered{}, index: map[string]*Tool{}}
}

// Default is the process-wide registry that init() functions register into.
// It is the only package-level mutable state of the project.
var Default = New()

// normalize makes lookups case- and space-insensitive, as Bub's are.
func normalize(name string) string {
	name = strings.TrimSpace(name)
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c >= 'A' && c <= 'Z') || c == ' ' || c == '\t' {
			return strings.ToLower(strings.Join(strings.Fields(name), ""))
		}
	}
	return name
}

// Register adds a tool. It fails on an invalid tool or a name (runtime or
// model form) that is already taken; the error names both call sites.
func (r *Registry) Register(t *Tool) error {
	return r.register(t, callSite(2))
}

// MustRegister is Register for init(): a clash is a programmer's mistake.
func (r *Registry) MustRegister(t *Tool) {
	if err := r.register(t, callSite(2)); err != nil {
		panic(err)
	}
}

func (r *Registry) register(t *Tool, site site) error {
	if t == nil {
		return fmt.Errorf("registry: Register of a nil tool at %s", site)
	}
	if err := checkName(t.Name); err != nil {
		return err
	}
	if t.Handler == nil {
		return fmt.Errorf("registry: tool %q has no handler (registered at %s)", t.Name, site)
	}
	if t.validator == nil {
		if err := t.compile(); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := []string{normalize(t.Name), normalize(t.ModelName())}
	for _, k := range keys {
		if old, ok := r.index[k]; ok {
			return fmt.Errorf("registry: tool %q registered twice: at %s and at %s (clashes with %q)", t.Name, r.tools[old.Name].site, site, old.Name)
		}
	}
	r.tools[t.Name] = registered{t, site}
	for _, k := range keys {
		r.index[k] = t
	}
	return nil
}

// Unregister removes a tool; it reports whether the tool was there. Tests
// and dynamic providers (upstream servers going away) use it.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.index[normalize(name)]
	if !ok {
		return false
	}
	delete(r.tools, t.Name)
	delete(r.index, normalize(t.Name))
	delete(r.index, normalize(t.ModelName()))
	return true
}

// Lookup finds a tool by runtime or model name, ignoring case and spaces.
// A miss returns a not_found *Error that names close matches.
func (r *Registry) Lookup(name string) (*Tool, error) {
	r.mu.RLock()
	t, ok := r.index[normalize(name)]
	r.mu.RUnlock()
	if ok {
		return t, nil
	}
	return nil, r.unknown(name)
}

func (r *Registry) unknown(name string) *Error {
	msg := fmt.Sprintf("unknown tool name(s): '%s'", name)
	if m := textmatch.CloseMatches(name, r.Names(), 3, 0.6); len(m) > 0 {
		msg += " (did you mean " + quoteJoin(m) + "?)"
	}
	return &Error{Kind: KindNotFound, Message: msg}
}

func quoteJoin(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}

// Tools returns every registered tool, sorted by runtime name.
func (r *Registry) Tools() []*Tool {
	r.mu.RLock()
	out := make([]*Tool, 0, len(r.tools))
	for _, e := range r.tools {
		out = append(out, e.tool)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the sorted runtime names.
func (r *Registry) Names() []string {
	ts := r.Tools()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// AddHooks registers hooks. As with Bub's pluggy hooks, the ones added last
// run first, so builtin hooks (added first) run last.
func (r *Registry) AddHooks(h Hooks) {
	r.mu.Lock()
	r.hooks = append(r.hooks, h)
	r.mu.Unlock()
}

// Hooks returns the registered hooks in registration order.
func (r *Registry) Hooks() []Hooks {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]Hooks(nil), r.hooks...)
}

// Register adds a tool to Default.
func Register(t *Tool) error { return Default.register(t, callSite(2)) }

// MustRegister adds a tool to Default and panics on a clash; call it from
// init().
func MustRegister(t *Tool) {
	if err := Default.register(t, callSite(2)); err != nil {
		panic(err)
	}
}

// AddHooks registers hooks on Default.
func AddHooks(h Hooks) { Default.AddHooks(h) }

func callSite(skip int) site {
	var pc [1]uintptr
	if runtime.Callers(skip+1, pc[:]) == 0 {
		return 0
	}
	return site(pc[0])
}

// site is a registration's call site, as a program counter: the file and
// line are looked up only for an error that names them (runtime.Caller at
// every registration was a visible part of a cold start).
type site uintptr

// String is the site's file:line.
func (s site) String() string {
	if s == 0 {
		return "unknown"
	}
	f, _ := runtime.CallersFrames([]uintptr{uintptr(s)}).Next()
	if f.File == "" {
		return "unknown"
	}
	return fmt.Sprintf("%s:%d", f.File, f.Line)
}
