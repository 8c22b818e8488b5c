package toolsearch

import (
	"context"
	"testing"

	"github.com/bubbuild/bub-mcp/registry"
)

func newTool(name, desc string) *registry.Tool {
	return registry.MustNewTool(name, desc, func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) { return "", nil })
}

// TestIndexCache: one index per set of tools, shared; a tool replaced
// under the same name (a restarted upstream) is another set; the cache
// keeps at most its bound, dropping the least recently used.
func TestIndexCache(t *testing.T) {
	c := newIndexCache(2)
	a, b := newTool("x.read", "Read."), newTool("x.write", "Write.")
	setA := []*registry.Tool{a, b}
	first := c.get(setA)
	if again := c.get([]*registry.Tool{a, b}); again != first {
		t.Error("the same tools got a second index")
	}
	changed := newTool("x.read", "Read a file.")
	second := c.get([]*registry.Tool{changed, b})
	if second == first {
		t.Fatal("a replaced tool kept the old index")
	}
	if got := second.ix.scores(tokens("file")); got[0] == 0 {
		t.Errorf("the new index does not know the new description: %v", got)
	}
	c.get(setA) // A is now the most recent; the changed set is older
	third := c.get([]*registry.Tool{b})
	if n := c.lru.Len(); n != 2 {
		t.Errorf("%d indexes kept; want 2", n)
	}
	if c.lookup(second.key, second.tools) != nil {
		t.Error("the least recently used index was kept")
	}
	if c.lookup(first.key, setA) != first || c.lookup(third.key, third.tools) != third {
		t.Error("a recent index was dropped")
	}
}
