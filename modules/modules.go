// Package modules is bub-mcp's one module registry, as in Caddy: every
// module registers in init() by a namespaced ID and is enabled by a blank
// import. The ID's last word is the module's name and the words before it
// its namespace: "builtin" and "codemode" are App modules (the empty
// namespace, loaded by every App), "environment.sandbox" is the sandbox
// Environment, "provider.<name>" a tool provider, "store.postgres" a
// session store. Modules of a namespace are made for one use each (a
// profile's environment, the store) by whoever owns that use.
//
// It is a leaf package so that environment, providers and sessions can
// register their modules without importing the application that loads
// them. The registry is the only package-level mutable state modules
// share; each use makes its own instance with New.
package modules

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Module is a registered unit of bub-mcp: it describes itself with
// BubModule. What else it can do (provision itself, make Environments,
// open a store) it says by implementing the interface its namespace
// defines.
type Module interface {
	// BubModule returns the module's registration.
	BubModule() Info
}

// Info registers a module.
type Info struct {
	// ID names the module: lower case, dot-separated words of letters,
	// digits and underscores, each starting with a letter; a word after
	// the first may hold '-' too, as a name in bub.toml may
	// ("builtin", "environment.sandbox", "provider.my-tools").
	ID string
	// Config names the top-level bub.toml table decoded into the value
	// New returns (toml struct tags), such as "codemode"; empty means
	// none. For a module made per use (an environment, a store) it is
	// decoded first, as defaults shared by every use, before the use's
	// own nested table. Several modules may read one table; a key none
	// of them knows is refused.
	Config string
	// New returns a new, empty instance; it must have no side effects.
	New func() Module

	seq int // registration order
}

// Namespace is the ID without its last word: "" for "builtin",
// "environment" for "environment.sandbox".
func (i Info) Namespace() string { return Namespace(i.ID) }

// Name is the ID's last word: "sandbox" for "environment.sandbox".
func (i Info) Name() string { return i.ID[strings.LastIndexByte(i.ID, '.')+1:] }

// Namespace returns the namespace of a module ID.
func Namespace(id string) string {
	if i := strings.LastIndexByte(id, '.'); i >= 0 {
		return id[:i]
	}
	return ""
}

var (
	mu       sync.RWMutex
	registry = map[string]Info{}
	seq      int
)

// validID reports whether id matches ^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_-]*)*$:
// a loop, since every module registers in init and a regexp compiled
// there was part of every start.
func validID(id string) bool {
	for i, seg := range strings.Split(id, ".") {
		if seg == "" || seg[0] < 'a' || seg[0] > 'z' {
			return false
		}
		for j := 1; j < len(seg); j++ {
			c := seg[j]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' && i > 0) {
				return false
			}
		}
	}
	return true
}

// Register makes a module available. Call it from init(); it panics on a
// malformed or taken ID or a nil New, since both are programming
// mistakes (as database/sql's Register does).
func Register(m Module) {
	info := m.BubModule()
	if !validID(info.ID) {
		panic(fmt.Sprintf("modules: Register: bad module ID %q (want lower-case words separated by dots)", info.ID))
	}
	if info.New == nil {
		panic("modules: Register: module " + info.ID + " has no New")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[info.ID]; dup {
		panic("modules: Register: module " + info.ID + " registered twice")
	}
	seq++
	info.seq = seq
	registry[info.ID] = info
}

// Lookup returns a registered module by ID; the error for an unknown one
// lists the modules of its namespace and hints at the usual cause.
func Lookup(id string) (Info, error) {
	mu.RLock()
	m, ok := registry[id]
	mu.RUnlock()
	if !ok {
		ns := Namespace(id)
		what := "module"
		if ns != "" {
			what = ns
		}
		return Info{}, fmt.Errorf("unknown %s %q (registered: %s; forgotten import?)", what, id[strings.LastIndexByte(id, '.')+1:], strings.Join(Names(ns), ", "))
	}
	return m, nil
}

// All returns every registered module, sorted by ID.
func All() []Info {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Info, 0, len(registry))
	for _, m := range registry {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// In returns the modules of a namespace ("" for the App modules), sorted
// by ID; a namespace's own sub-namespaces are not in it.
func In(namespace string) []Info {
	mu.RLock()
	defer mu.RUnlock()
	var out []Info
	for id, m := range registry {
		if Namespace(id) == namespace {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// InOrder returns the modules of a namespace in registration order, for
// namespaces whose members run in sequence (providers).
func InOrder(namespace string) []Info {
	out := In(namespace)
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// Names returns the names (last ID words) of a namespace's modules,
// sorted, as a configuration file spells them.
func Names(namespace string) []string {
	var out []string
	for _, m := range In(namespace) {
		out = append(out, m.Name())
	}
	return out
}
