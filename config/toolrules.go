package config

import (
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// HintPrefix marks an entry of a profile's confirm or code_mode_tools
// list that names an annotation hint ("hint:destructive") rather than a
// tool glob, so a hint word never clashes with a tool's name.
const HintPrefix = "hint:"

// Hints are the words a "hint:" entry may name, each true for a tool
// whose annotations (an upstream's own or its overrides, a builtin's
// registered ones) say so. "destructive" follows MCP: it holds only for a
// tool that is not read-only. Each has a "not_" form.
var Hints = []string{"read_only", "destructive", "idempotent", "open_world"}

// hintHolds reports whether the hint word (without "not_") holds for a.
func hintHolds(word string, a registry.Annotations) (holds, known bool) {
	switch word {
	case "read_only":
		return a.ReadOnly, true
	case "destructive":
		return !a.ReadOnly && a.Destructive, true
	case "idempotent":
		return a.Idempotent, true
	case "open_world":
		return a.OpenWorld, true
	}
	return false, false
}

// CheckToolRules checks a list of tool globs and "hint:<word>" entries,
// naming the first bad entry.
func CheckToolRules(rules []string) error {
	var globs []string
	for _, r := range rules {
		word, ok := strings.CutPrefix(strings.TrimSpace(r), HintPrefix)
		if !ok {
			globs = append(globs, r)
			continue
		}
		if _, known := hintHolds(strings.TrimPrefix(word, "not_"), registry.Annotations{}); !known {
			return fmt.Errorf("unknown hint %q (known: hint:read_only, hint:destructive, hint:idempotent, hint:open_world, each also as hint:not_<word>)", r)
		}
	}
	return providers.CheckGlobs(globs)
}

// MatchToolRules reports whether t matches one of the rules: a glob over
// its runtime (or model) name, or a hint its annotations carry.
func MatchToolRules(rules []string, t *registry.Tool) bool {
	for _, r := range rules {
		word, ok := strings.CutPrefix(strings.TrimSpace(r), HintPrefix)
		if !ok {
			if providers.MatchGlob(r, t.Name) {
				return true
			}
			continue
		}
		neg := strings.HasPrefix(word, "not_")
		holds, known := hintHolds(strings.TrimPrefix(word, "not_"), t.Annotations)
		if known && holds != neg {
			return true
		}
	}
	return false
}
