package app

import (
	"context"
	"fmt"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/modules"
)

// Module is a unit of bub-mcp's features with a lifecycle, as in Caddy: it
// registers in init() by ID (package modules holds the one registry), and
// every App makes its own instance with New (no side effects), decodes its
// configuration table into it, provisions it, validates it, uses it and
// finally cleans it up. An App module (an ID without a dot) contributes
// tools, hooks, filters, providers or resources to the App in Provision;
// a namespaced module (environment.<kind>, provider.<name>, store.<kind>)
// is made for one use by LoadModule.
type Module = modules.Module

// ModuleInfo registers a module.
type ModuleInfo = modules.Info

// Provisioner is a module that sets itself up once its configuration is
// decoded: it fills in defaults, opens what it needs and contributes to
// the App. When Provision fails, the App cleans up every module
// provisioned so far, this one included.
type Provisioner interface {
	Provision(ctx context.Context, a *App) error
}

// Validator is a module that checks its configuration after Provision.
type Validator interface {
	Validate() error
}

// CleanerUpper is a module that releases what it holds when the App
// closes, or after a partial Provision, so Cleanup must cope with a
// module that is only half set up.
type CleanerUpper interface {
	Cleanup() error
}

// UseProvisioner is a module made for one use by LoadModule (a profile's
// environment, an upstream server's) that sets itself up knowing where it
// was configured: at names its table, so that its errors name the file,
// line and key. A module that needs no such place may implement
// Provisioner instead.
type UseProvisioner interface {
	ProvisionUse(ctx context.Context, a *App, at *config.ModuleRef) error
}

// LoadModule makes the module <namespace>.<kind> for one use configured
// at at (kind "" means def): it decodes the module's shared table
// (ModuleInfo.Config) and then at's own keys into a new instance,
// provisions it (ProvisionUse, else Provision) and validates it. The App
// cleans it up when it closes. Call it from a module's Provision; the App
// itself loads each profile's environment this way.
func (a *App) LoadModule(ctx context.Context, namespace, def string, at *config.ModuleRef) (Module, error) {
	a.mustProvision("LoadModule")
	kind := at.Kind
	if kind == "" {
		kind = def
	}
	info, err := modules.Lookup(namespace + "." + kind)
	if err != nil {
		return nil, at.FailKind(err.Error())
	}
	m := info.New()
	if info.Config != "" {
		if err := a.cfg.Decode(info.Config, m); err != nil {
			return nil, err
		}
	}
	if err := at.Decode(m); err != nil {
		return nil, err
	}
	a.uses = append(a.uses, loaded{info.ID, m})
	switch p := m.(type) {
	case UseProvisioner:
		err = p.ProvisionUse(ctx, a, at)
	case Provisioner:
		err = p.Provision(ctx, a)
	}
	if err != nil {
		return nil, fmt.Errorf("app: module %s: %w", info.ID, err)
	}
	if v, ok := m.(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("app: module %s: %w", info.ID, err)
		}
	}
	return m, nil
}

// claimSharedTables decodes the shared table of every namespaced module
// into a scratch instance, so that a table such as [sandbox] is checked
// (and not refused as unknown) even when no profile uses its module.
func (a *App) claimSharedTables() error {
	for _, info := range modules.All() {
		if info.Namespace() == "" || info.Config == "" {
			continue
		}
		if err := a.cfg.Decode(info.Config, info.New()); err != nil {
			return err
		}
	}
	return nil
}

// RegisterModule makes a module available to every App. Call it from
// init(); it panics on a malformed or taken ID or a nil New, since both
// are programming mistakes.
func RegisterModule(m Module) { modules.Register(m) }

// Modules returns the registered App modules (IDs without a namespace),
// sorted by ID: the ones an App loads when Options.Modules is nil.
func Modules() []ModuleInfo { return modules.In("") }

// lookupModule returns a registered module by ID.
func lookupModule(id string) (ModuleInfo, error) {
	m, err := modules.Lookup(id)
	if err != nil {
		ids := make([]string, 0)
		for _, m := range Modules() {
			ids = append(ids, m.ID)
		}
		return ModuleInfo{}, fmt.Errorf("app: unknown module %q (registered: %v; forgotten import?)", id, ids)
	}
	return m, nil
}
