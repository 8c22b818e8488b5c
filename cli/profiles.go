package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/upstream"
)

// checkProfileTools refuses a profile whose tools glob matches no tool
// (a typo served zero tools, silently): the error names the profile, the
// glob and the file's line. Tools that arrive after start-up are allowed
// for: a glob that can name a tool of an upstream server (its literal
// start is a prefix of "<upstream>." or starts with it, as "github.*",
// "git*" or "github.search_*") is not checked, since a lazy or
// still-starting upstream has not registered its tools yet.
func checkProfileTools(a *app.App) error {
	cfg := a.Config()
	tools := a.Registry().Tools()
	var namespaces []string
	if m, ok := upstream.FromApp(a); ok {
		for _, s := range m.Status() {
			namespaces = append(namespaces, strings.ToLower(s.Name)+".")
		}
	}
	for _, name := range cfg.ProfileNames() {
		for _, glob := range cfg.Profiles[name].Tools {
			if matchesAny(glob, tools) || mayBeUpstream(glob, namespaces) {
				continue
			}
			return cfg.Fail(fmt.Sprintf("profile %s: tools glob %q matches no tool (see bub-mcp tools)", name, glob), "profiles", name, "tools")
		}
	}
	return nil
}

func matchesAny(glob string, tools []*registry.Tool) bool {
	return slices.ContainsFunc(tools, func(t *registry.Tool) bool { return providers.MatchGlob(glob, t.Name) })
}

// mayBeUpstream reports whether glob can match a name in one of the
// namespaces ("github."), judged by its literal start (before any
// wildcard) in runtime or model form.
func mayBeUpstream(glob string, namespaces []string) bool {
	lit := strings.ToLower(strings.TrimSpace(glob))
	if i := strings.IndexAny(lit, "*?[\\"); i >= 0 {
		lit = lit[:i]
	}
	for _, ns := range namespaces {
		for _, n := range []string{ns, registry.ModelName(strings.TrimSuffix(ns, ".")) + "_"} {
			if strings.HasPrefix(n, lit) || strings.HasPrefix(lit, n) {
				return true
			}
		}
	}
	return false
}

// profileReach is what a profile's view reaches: its listed tools, the
// deferred ones it can load and those only run_code can call.
func profileReach(v *providers.View) []*registry.Tool {
	seen := map[string]bool{}
	var out []*registry.Tool
	for _, list := range [][]*registry.Tool{v.Tools, v.Deferred, v.CodeTools} {
		for _, t := range list {
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b *registry.Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// profileToolCount is how many tools the profile's view reaches, as
// `tools --profile` lists them, for the start-up log: the registry's
// count said tools=22 for a profile that served one tool, or none. -1
// when the view cannot be built (serving reports that error itself).
func profileToolCount(ctx context.Context, a *app.App, profile string) int {
	conn := providers.Connection{Transport: "stdio", Profile: profile}
	if err := a.Resolve(ctx, &conn); err != nil {
		return -1
	}
	v, err := a.View(ctx, &conn)
	if err != nil {
		return -1
	}
	return len(profileReach(v))
}
