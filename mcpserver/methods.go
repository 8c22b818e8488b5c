package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/mcp"
)

// MethodFunc answers one request of a method an Extension adds, for the
// caller conn (unresolved, as ConnectionFromContext gives it). params are
// the request's raw params (nil when it has none); modern says the request
// came on the 2026-07-28 wire. The result is encoded as the JSON-RPC
// result; a *MethodError becomes that JSON-RPC error, any other error an
// internal one.
type MethodFunc func(ctx context.Context, conn *providers.Connection, params json.RawMessage, modern bool) (any, error)

// MethodError is a JSON-RPC error a MethodFunc answers with, such as
// CodeInvalidParams for an unknown skill.
type MethodError = mcpgofix.MethodError

// CodeInvalidParams is JSON-RPC's "invalid params" error code.
const CodeInvalidParams = mcp.INVALID_PARAMS

// CacheableResult, embedded in a MethodFunc's result, carries the
// 2026-07-28 cache hints (SetCacheHints); the name is this package's so
// that an Extension needs no mcp-go import.
type CacheableResult = mcp.CacheableResult

// CacheScopePrivate marks a result as cacheable for this caller only.
const CacheScopePrivate = mcp.CacheScopePrivate

// addMethods routes the Extensions' methods through mcpgofix.Methods
// (mcp-go cannot register a request method).
func addMethods(m *mcpgofix.Methods, exts []Extension) error {
	for _, e := range exts {
		for name, f := range e.Methods {
			err := m.Add(name, func(ctx context.Context, params json.RawMessage, modern bool) (any, error) {
				return f(ctx, ConnectionFromContext(ctx), params, modern)
			})
			if err != nil {
				return fmt.Errorf("mcpserver: %w", err)
			}
		}
	}
	return nil
}
