package mcpserver

import (
	"net/http"

	"github.com/bubbuild/bub-mcp/internal/reclaim"
)

// bounds limits what a POST may bring (size, read time, concurrency, in
// total and per client) before anything else reads it: see bounded.
func bounds(l Limits, reclaim *reclaim.Reclaimer) Middleware {
	return func(next http.Handler) http.Handler { return bounded(next, l, reclaim) }
}
