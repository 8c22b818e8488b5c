package mcpgofix

// Defect: mcp-go v1.2.1's server.WithHooks replaces the server's whole
// Hooks object, so an option that installs hooks (an Extension's) would
// silently drop the hooks installed before it (initialize instructions,
// resource filtering, telemetry).
// Upstream: mark3labs/mcp-go PR #728 (merged) added MCPServer.GetHooks
// for composability, but WithHooks still replaces; no upstream issue
// asks WithHooks to append, as of 2026-12.
// Test: TestExtensionHooksMerge.
// Delete when: WithHooks appends to the hooks already installed.

import (
	"reflect"

	"github.com/mark3labs/mcp-go/server"
)

// AppendingOption applies opt so that the hooks it installs are appended
// to ours (run after them) instead of replacing them. Hooks opt's caller
// adds to its own object after the server is built are not seen.
func AppendingOption(ours *server.Hooks, opt server.ServerOption) server.ServerOption {
	return func(s *server.MCPServer) {
		opt(s)
		if theirs := s.GetHooks(); theirs != ours {
			MergeHooks(ours, theirs)
			server.WithHooks(ours)(s)
		}
	}
}

// MergeHooks appends every hook list of src to dst's. Hooks is a struct
// of slices only; reflection keeps this right when mcp-go adds a hook
// point.
func MergeHooks(dst, src *server.Hooks) {
	if src == nil {
		return
	}
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for i := range d.NumField() {
		if f := d.Field(i); f.Kind() == reflect.Slice && f.CanSet() {
			f.Set(reflect.AppendSlice(f, s.Field(i)))
		}
	}
}
