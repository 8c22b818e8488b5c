// Package toolsearch is tool_search: BM25 over the names, titles,
// descriptions and argument names of every tool in the caller's View,
// deferred and code-mode ones included. It returns the best definitions,
// ready to call, and loads the deferred ones among them into the session
// as tool.describe does, so a catalog of hundreds of tools can stay out of
// tools/list without the model reading a catalog of it first.
package toolsearch

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

func init() { app.RegisterModule(Module{}) }

// Name is the tool's runtime name; models call it tool_search.
const Name = providers.SearchToolName

// Limits of one call.
const (
	defaultLimit = 5
	maxLimit     = 20
	// maxQuery bounds the query a model may send.
	maxQuery = 1000
)

// Modes of [tools] search.
const (
	ModeAuto = "auto" // listed to views that hold a deferred tool
	ModeOn   = "on"   // listed to every view the profile's scope allows it in
	ModeOff  = "off"  // not registered
)

// Weights of a tool's fields: a word of its name says more about what it
// does than the same word in its description.
const (
	weightName        = 3
	weightTitle       = 2
	weightArgName     = 2
	weightDescription = 1
	weightArgDesc     = 1
)

// maxIndexes bounds the cache of indexes: one per distinct set of tools
// in a View, which is about one per profile (a session's loaded tools
// move tools between listed and deferred, not in or out of the set).
const maxIndexes = 64

// Module is tool_search, configured by [tools] search.
type Module struct {
	Search string `toml:"search"` // [tools] search = "auto" | "on" | "off"

	app   *app.App
	cache *indexCache
}

// BubModule registers the module as "toolsearch"; it reads [tools], with
// the App and spill.
func (Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "toolsearch", Config: "tools", New: func() app.Module { return new(Module) }}
}

// Provision registers tool.search unless search = "off"; with "auto" (the
// default) a filter shows it only to Views that hold a deferred tool,
// which is when the model cannot see every tool it may call. The filter
// decides per View, so tools that arrive later (an upstream server that
// starts after bub-mcp) bring tool_search with them.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	m.app = a
	if m.Search == "" {
		m.Search = ModeAuto
	}
	switch m.Search {
	case ModeOff:
		return nil
	case ModeAuto:
		a.AddFilter(autoFilter)
	case ModeOn:
	default:
		return a.Config().Fail(fmt.Sprintf("must be %q, %q or %q, not %q", ModeAuto, ModeOn, ModeOff, m.Search), "tools", "search")
	}
	m.cache = newIndexCache(maxIndexes)
	// Loading a deferred tool changes what a session lists.
	a.EnableToolChanges()
	return a.RegisterTool(m.tool())
}

// autoFilter drops tool.search from a View without deferred tools: every
// tool there is listed already.
func autoFilter(ctx context.Context, conn *providers.Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
	if slices.ContainsFunc(tools, func(t *registry.Tool) bool { return t.Deferred }) {
		return tools, "", nil
	}
	return slices.DeleteFunc(slices.Clone(tools), func(t *registry.Tool) bool { return t.Name == Name }), "", nil
}

type searchArgs struct {
	Query string `json:"query" jsonschema_description:"What the tool should do, in a few words ('read a file')."`
	Limit int    `json:"limit,omitempty" jsonschema:"default=5,minimum=0,maximum=20" jsonschema_description:"Most tools returned: default 5, at most 20."`
}

// Definition is one tool found, as the model calls it.
type Definition struct {
	// Name is the name to call the tool by.
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// RunCode says the tool is a function of code mode's stub, called
	// from inside run_code rather than directly.
	RunCode bool    `json:"run_code,omitempty"`
	Score   float64 `json:"score"`
}

// Result is what tool_search returns.
type Result struct {
	// Tools are the best matches, best first; none when no word of the
	// query occurs in any tool.
	Tools []Definition `json:"tools"`
	// Loaded are the deferred tools among them, now listed for the
	// session.
	Loaded []string `json:"loaded,omitempty"`
}

func (m *Module) tool() *registry.Tool {
	return registry.MustNewTool(Name, "Find tools by what they do among all you may call, listed or not: returns the best matches' definitions, ready to call, and lists them from now on.",
		func(ctx context.Context, tc *registry.ToolContext, in searchArgs) (Result, error) {
			if in.Query == "" {
				return Result{}, registry.NewError(registry.KindInvalidInput, "query: say what the tool should do", nil)
			}
			if len(in.Query) > maxQuery {
				return Result{}, registry.NewError(registry.KindInvalidInput, fmt.Sprintf("query: at most %d bytes", maxQuery), nil)
			}
			if in.Limit < 0 || in.Limit > maxLimit {
				return Result{}, registry.NewError(registry.KindInvalidInput, fmt.Sprintf("limit: between 1 and %d (0 means %d)", maxLimit, defaultLimit), nil)
			}
			if in.Limit == 0 {
				in.Limit = defaultLimit
			}
			if tc == nil || tc.Conn == nil || tc.Session == nil {
				return Result{}, registry.NewError(registry.KindConfig, "tool.search needs a caller with a session", nil)
			}
			v, err := m.app.View(ctx, tc.Conn)
			if err != nil {
				return Result{}, err
			}
			out := m.search(v, in.Query, in.Limit)
			if err := m.app.LoadTools(tc.Session, tc.Conn, out.Loaded); err != nil {
				return Result{}, err
			}
			return out, nil
		},
		registry.WithPreserve(),
		registry.WithAnnotations(registry.Annotations{Title: "Search tools", ReadOnly: true, Idempotent: true}))
}

// viewIndexKey keys a View's index in View.Memo.
type viewIndexKey struct{}

// search ranks v's tools for query: the limit best with a score above
// zero, ties in name order.
func (m *Module) search(v *providers.View, query string, limit int) Result {
	e := v.Memo(viewIndexKey{}, func() any { return m.cache.get(searchable(v)) }).(*indexEntry)
	scores := e.ix.scores(tokens(query))
	order := make([]int, 0, len(scores))
	for i, s := range scores {
		if s > 0 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return scores[order[i]] > scores[order[j]] })
	if len(order) > limit {
		order = order[:limit]
	}
	out := Result{Tools: []Definition{}}
	for _, i := range order {
		t := e.tools[i]
		_, direct := v.Lookup(t.Name)
		out.Tools = append(out.Tools, Definition{Name: t.ModelName(), Title: t.Annotations.Title, Description: t.Description,
			InputSchema: t.InputSchema, RunCode: !direct, Score: round(scores[i])})
		if slices.Contains(v.Deferred, t) {
			out.Loaded = append(out.Loaded, t.Name)
		}
	}
	return out
}

// round keeps four decimals: enough to order, short for a model to read.
func round(f float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 4, 64), 64)
	return r
}

// searchable is every tool the View may call, directly or from run_code,
// but tool.search itself, sorted by name.
func searchable(v *providers.View) []*registry.Tool {
	var out []*registry.Tool
	for _, ts := range [][]*registry.Tool{v.Tools, v.Deferred, v.CodeTools} {
		for _, t := range ts {
			if t.Name != Name {
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return slices.CompactFunc(out, func(a, b *registry.Tool) bool { return a == b })
}

// document is what BM25 reads of a tool.
func document(t *registry.Tool) []term {
	var d []term
	add := func(text string, w float64) {
		for _, tok := range tokens(text) {
			d = append(d, term{tok, w})
		}
	}
	add(t.Name, weightName)
	add(t.Annotations.Title, weightTitle)
	add(t.Description, weightDescription)
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if json.Unmarshal(t.InputSchema, &schema) == nil {
		names := make([]string, 0, len(schema.Properties))
		for name := range schema.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			add(name, weightArgName)
			add(schema.Properties[name].Description, weightArgDesc)
		}
	}
	return d
}

// indexEntry is the index of one set of tools; a document's position is
// its tool's in tools.
type indexEntry struct {
	key   uint64
	tools []*registry.Tool
	ix    *bm25
	el    *list.Element
}

// indexCache keeps the indexes of the last max distinct tool sets, so the
// sessions of one profile share one. A set is its tools' identities
// (hashed by name, compared by pointer): a tool an upstream changes is a
// new *registry.Tool, so a changed set gets a new index, and the old one
// ages out.
type indexCache struct {
	mu      sync.Mutex
	max     int
	entries map[uint64][]*indexEntry
	lru     *list.List // front: most recently used
}

func newIndexCache(max int) *indexCache {
	return &indexCache{max: max, entries: map[uint64][]*indexEntry{}, lru: list.New()}
}

// get returns the index of tools, building it on a miss.
func (c *indexCache) get(tools []*registry.Tool) *indexEntry {
	h := fnv.New64a()
	for _, t := range tools {
		h.Write([]byte(t.Name))
		h.Write([]byte{0})
	}
	key := h.Sum64()
	if e := c.lookup(key, tools); e != nil {
		return e
	}
	docs := make([][]term, len(tools))
	for i, t := range tools {
		docs[i] = document(t)
	}
	e := &indexEntry{key: key, tools: tools, ix: newBM25(docs)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if got := c.lookupLocked(key, tools); got != nil {
		return got // built meanwhile by another call
	}
	e.el = c.lru.PushFront(e)
	c.entries[key] = append(c.entries[key], e)
	for c.lru.Len() > c.max {
		old := c.lru.Remove(c.lru.Back()).(*indexEntry)
		c.entries[old.key] = slices.DeleteFunc(c.entries[old.key], func(x *indexEntry) bool { return x == old })
		if len(c.entries[old.key]) == 0 {
			delete(c.entries, old.key)
		}
	}
	return e
}

// lookup finds the entry of exactly these tools (the same pointers: a
// tool of the same name from a restarted upstream is another tool).
func (c *indexCache) lookup(key uint64, tools []*registry.Tool) *indexEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(key, tools)
}

func (c *indexCache) lookupLocked(key uint64, tools []*registry.Tool) *indexEntry {
	for _, e := range c.entries[key] {
		if slices.Equal(e.tools, tools) {
			c.lru.MoveToFront(e.el)
			return e
		}
	}
	return nil
}

var _ app.Provisioner = (*Module)(nil)
