package standard_test

import (
	"slices"
	"testing"

	"github.com/bubbuild/bub-mcp/modules"
	_ "github.com/bubbuild/bub-mcp/modules/standard"
)

// TestStandardSet: the import enables the standard modules of every
// namespace, so a binary that imports it serves what bub-mcp always did.
func TestStandardSet(t *testing.T) {
	for _, id := range []string{
		"builtin", "codemode", "confirm", "limits", "skills", "spill", "toolsearch", "upstream",
		"environment.local", "environment.sandbox", "store.file", "store.memory", "store.postgres",
	} {
		if _, err := modules.Lookup(id); err != nil {
			t.Errorf("module %s: %v", id, err)
		}
	}
	var ids []string
	for _, m := range modules.All() {
		ids = append(ids, m.ID)
	}
	if slices.Contains(ids, "sandbox") {
		t.Errorf("modules = %v; the sandbox is the environment module environment.sandbox, not an App module", ids)
	}
}
