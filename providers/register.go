package providers

import (
	"context"
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/modules"
	"github.com/bubbuild/bub-mcp/registry"
)

// Namespace is the module namespace of providers: a provider is the
// module provider.<name>, which profiles pick with
// `providers = ["<name>", ...]`.
const Namespace = "provider"

// Module is a provider module, registered in package modules under the
// ID "provider.<name>".
type Module interface {
	modules.Module
	// Provide prepares a View's tools, as a Provider does.
	Provide(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error)
}

// funcModule is a provider registered with Register.
type funcModule struct {
	name string
	p    Provider
}

func (m *funcModule) BubModule() modules.Info {
	return modules.Info{ID: Namespace + "." + m.name, New: func() modules.Module { return m }}
}

func (m *funcModule) Provide(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
	return m.p(ctx, conn, tools)
}

// Register makes a provider available by name, for profiles to pick with
// `providers = ["<name>", ...]`: it registers the module provider.<name>
// (see Module). Picked providers run after the scope and code mode are
// applied, in registration order. Call it from init(); it panics, as
// database/sql's Register does, on an empty name or one that is not lower
// case letters, digits, '_' and '-', a nil provider or a name registered
// twice.
func Register(name string, p Provider) {
	if strings.TrimSpace(name) == "" {
		panic("providers: Register with an empty name")
	}
	if strings.Contains(name, ".") {
		panic("providers: Register of " + name + ": a name has no dots (it is the last word of the module ID)")
	}
	if p == nil {
		panic("providers: Register of a nil provider for " + name)
	}
	modules.Register(&funcModule{name, p})
}

// Names returns the registered provider names, sorted.
func Names() []string { return modules.Names(Namespace) }

// Lookup returns the provider registered under name; the error for an
// unknown one lists the registered names and hints at the usual cause.
func Lookup(name string) (Provider, error) {
	info, err := modules.Lookup(Namespace + "." + name)
	if err != nil {
		return nil, fmt.Errorf("providers: unknown provider %q (registered: %s; forgotten import?)", name, strings.Join(Names(), ", "))
	}
	m, ok := info.New().(Module)
	if !ok {
		return nil, fmt.Errorf("providers: module %s provides nothing (it lacks Provide)", info.ID)
	}
	return m.Provide, nil
}

// Run applies the registered providers among names to tools, in
// registration order, and joins their prompt fragments.
func Run(ctx context.Context, names []string, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var prompts []string
	for _, info := range modules.InOrder(Namespace) {
		if !want[info.Name()] {
			continue
		}
		m, ok := info.New().(Module)
		if !ok {
			return nil, "", fmt.Errorf("providers: module %s provides nothing (it lacks Provide)", info.ID)
		}
		out, prompt, err := m.Provide(ctx, conn, tools)
		if err != nil {
			return nil, "", fmt.Errorf("providers: %s: %w", info.Name(), err)
		}
		tools = out
		if prompt = strings.TrimSpace(prompt); prompt != "" {
			prompts = append(prompts, prompt)
		}
	}
	return tools, strings.Join(prompts, "\n\n"), nil
}
