package app

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
)

// Module is a unit of bub-mcp's features with a lifecycle, as in Caddy: it
// registers in init() by ID, and every App makes its own instance with
// New (no side effects), decodes its configuration table into it,
// provisions it, validates it, uses it and finally cleans it up. A
// module contributes tools, hooks, filters, providers or resources to the
// App in Provision.
type Module interface {
	// BubModule returns the module's registration.
	BubModule() ModuleInfo
}

// ModuleInfo registers a module.
type ModuleInfo struct {
	// ID names the module: lower case, dot-separated words of letters,
	// digits and underscores ("builtin", "codemode", "conformance").
	ID string
	// Config names the top-level bub.toml table decoded into the value
	// New returns (toml struct tags), such as "codemode"; empty means the
	// module has no configuration. Several modules may read one table;
	// a key none of them knows is refused.
	Config string
	// New returns a new, empty instance; it must have no side effects.
	New func() Module
}

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

var (
	modulesMu sync.RWMutex
	modules   = map[string]ModuleInfo{}

	moduleIDRE = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
)

// RegisterModule makes a module available to every App. Call it from
// init(); it panics on a malformed or taken ID or a nil New, since both
// are programming mistakes.
func RegisterModule(m Module) {
	info := m.BubModule()
	if !moduleIDRE.MatchString(info.ID) {
		panic(fmt.Sprintf("app: RegisterModule: bad module ID %q (want lower-case words separated by dots)", info.ID))
	}
	if info.New == nil {
		panic("app: RegisterModule: module " + info.ID + " has no New")
	}
	modulesMu.Lock()
	defer modulesMu.Unlock()
	if _, dup := modules[info.ID]; dup {
		panic("app: RegisterModule: module " + info.ID + " registered twice")
	}
	modules[info.ID] = info
}

// Modules returns the registered modules, sorted by ID.
func Modules() []ModuleInfo {
	modulesMu.RLock()
	defer modulesMu.RUnlock()
	out := make([]ModuleInfo, 0, len(modules))
	for _, m := range modules {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// lookupModule returns a registered module by ID.
func lookupModule(id string) (ModuleInfo, error) {
	modulesMu.RLock()
	m, ok := modules[id]
	modulesMu.RUnlock()
	if !ok {
		ids := make([]string, 0)
		for _, m := range Modules() {
			ids = append(ids, m.ID)
		}
		return ModuleInfo{}, fmt.Errorf("app: unknown module %q (registered: %v; forgotten import?)", id, ids)
	}
	return m, nil
}
