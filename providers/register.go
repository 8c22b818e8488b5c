package providers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/registry"
)

var (
	namedMu sync.RWMutex
	named   []namedProvider // in registration order
)

type namedProvider struct {
	name string
	p    Provider
}

// Register makes a provider available by name, for profiles to pick with
// `providers = ["<name>", ...]`. Picked providers run after the scope and
// code mode are applied, in registration order. Call it from init(); it
// panics, as database/sql's Register does, on an empty name, a nil
// provider or a name registered twice.
func Register(name string, p Provider) {
	namedMu.Lock()
	defer namedMu.Unlock()
	if strings.TrimSpace(name) == "" {
		panic("providers: Register with an empty name")
	}
	if p == nil {
		panic("providers: Register of a nil provider for " + name)
	}
	for _, n := range named {
		if n.name == name {
			panic("providers: Register called twice for " + name)
		}
	}
	named = append(named, namedProvider{name, p})
}

// Names returns the registered provider names, sorted.
func Names() []string {
	namedMu.RLock()
	defer namedMu.RUnlock()
	return namesLocked()
}

// Lookup returns the provider registered under name; the error for an
// unknown one lists the registered names and hints at the usual cause.
func Lookup(name string) (Provider, error) {
	namedMu.RLock()
	defer namedMu.RUnlock()
	for _, n := range named {
		if n.name == name {
			return n.p, nil
		}
	}
	return nil, fmt.Errorf("providers: unknown provider %q (registered: %s; forgotten import?)", name, strings.Join(namesLocked(), ", "))
}

func namesLocked() []string {
	out := make([]string, len(named))
	for i, n := range named {
		out[i] = n.name
	}
	sort.Strings(out)
	return out
}

// Run applies the registered providers among names to tools, in
// registration order, and joins their prompt fragments.
func Run(ctx context.Context, names []string, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	namedMu.RLock()
	ps := append([]namedProvider(nil), named...)
	namedMu.RUnlock()
	var prompts []string
	for _, n := range ps {
		if !want[n.name] {
			continue
		}
		out, prompt, err := n.p(ctx, conn, tools)
		if err != nil {
			return nil, "", fmt.Errorf("providers: %s: %w", n.name, err)
		}
		tools = out
		if prompt = strings.TrimSpace(prompt); prompt != "" {
			prompts = append(prompts, prompt)
		}
	}
	return tools, strings.Join(prompts, "\n\n"), nil
}
