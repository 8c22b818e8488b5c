package mcpserver

import (
	"bytes"
	"encoding/json"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// toolWatcher is a Backend whose tools change while it runs (upstream MCP
// servers connect, restart, change their lists). *app.App implements it.
type toolWatcher interface {
	ToolsChangeable() bool
	OnToolsChanged(f func())
}

// sourced is a tool defined elsewhere (an upstream MCP server's tool),
// presented with the hints and metadata its source gave it.
type sourced interface{ MCPTool() mcp.Tool }

// passthrough is a result that came from another MCP server, sent on as
// it came unless a hook changed its text (spill), which text is. A
// failed one (isError) is found in the chain of the call's error.
type passthrough interface {
	MCPResult(text string) *mcp.CallToolResult
}

// served tracks the tools registered with mcp-go, by model name, so a
// registry change adds, replaces and deletes only what changed.
type served struct {
	mu sync.Mutex // serialises changes
	// set is replaced, never changed, under mu: tools/calls that must be
	// checked before dispatch read it, and a mutex there queued 32
	// concurrent calls (~36 µs of waiting each).
	set atomic.Pointer[servedSet]
}

// servedSet is one state of the served tools.
type servedSet struct {
	tools map[string]*registry.Tool
	// requires: some tool has Requires (a 2026-07-28 call is then
	// admitted before dispatch).
	requires bool
}

// load is the served tools now; nothing in it may be changed.
func (sv *served) load() *servedSet {
	if p := sv.set.Load(); p != nil {
		return p
	}
	return &noneServed
}

// noneServed is the served set before the first syncTools; never changed.
var noneServed servedSet

// store makes tools, which is not changed afterwards, the served tools.
func (sv *served) store(tools map[string]*registry.Tool) {
	set := &servedSet{tools: tools}
	for _, t := range tools {
		set.requires = set.requires || len(t.Requires) > 0
	}
	sv.set.Store(set)
}

// syncTools brings mcp-go's tool table in line with the registry: New
// fills it, and it runs again after the Backend's tools changed, telling
// every session (notifications/tools/list_changed).
func (s *Server) syncTools() {
	s.served.mu.Lock()
	defer s.served.mu.Unlock()
	want := map[string]*registry.Tool{}
	for _, t := range s.reg.Tools() {
		if t.AgentUse() {
			want[t.ModelName()] = t
		}
	}
	tools := maps.Clone(s.served.load().tools)
	if tools == nil {
		tools = map[string]*registry.Tool{}
	}
	var del []string
	for name := range tools {
		if _, ok := want[name]; !ok {
			del = append(del, name)
			delete(tools, name)
		}
	}
	if len(del) > 0 {
		s.mcp.DeleteTools(del...)
	}
	var add []*registry.Tool
	for name, t := range want {
		if tools[name] != t {
			add = append(add, t)
		}
	}
	if len(add) > 0 {
		s.addTools(tools, add)
	}
	s.served.store(tools)
	// mcp-go told clients as its table changed, which is before a list
	// shows the change (filter lists only served tools): tell them again
	// now that it does. Views change even when the table did not (a
	// tool's scope), so clients are told in any case.
	s.mcp.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
}

// addTools adds tools to mcp-go's table and to served. One batch, so clients are told once; only when
// mcp-go refuses a definition in it is each tool added alone, to keep the
// others.
func (s *Server) addTools(served map[string]*registry.Tool, add []*registry.Tool) {
	entry := func(t *registry.Tool) server.ServerTool {
		return server.ServerTool{Tool: dispatchTool(t), Handler: s.handle}
	}
	batch := make([]server.ServerTool, len(add))
	for i, t := range add {
		batch[i] = entry(t)
	}
	if err := mcpgofix.AddTool(s.mcp, batch...); err == nil {
		for _, t := range add {
			served[t.ModelName()] = t
		}
		return
	}
	for _, t := range add {
		if err := mcpgofix.AddTool(s.mcp, entry(t)); err != nil {
			s.log.Warn("mcp.tool.refused", "tool", t.Name, "error", err)
			continue
		}
		served[t.ModelName()] = t
	}
}

// dispatchTool is t's entry in mcp-go's table. mcp-go lists nothing from
// the table (filter lists the caller's View) and validates neither input
// nor output, so the entry only routes the call and, on the 2026 wire,
// checks Mcp-Param headers against the schema's x-mcp-header
// annotations: a schema without any is entered as a bare object, which
// spares mcp-go decoding every tool's schema at registration (4% of a
// cold start's CPU to the first tools/list).
func dispatchTool(t *registry.Tool) mcp.Tool {
	if bytes.Contains(t.InputSchema, []byte("x-mcp-header")) {
		return MCPTool(t)
	}
	return mcp.NewToolWithRawSchema(t.ModelName(), "", json.RawMessage(`{"type":"object"}`))
}

// detachable reports whether a 2025 session's tools/call of name calls a
// tool that may close its stream (registry.Tool.ClosesStream).
func (s *Server) detachable(name string) bool {
	t := s.served.load().tools[name]
	return t != nil && t.ClosesStream
}
