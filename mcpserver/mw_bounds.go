package mcpserver

import "net/http"

// bounds limits what a POST may bring (size, read time, concurrency, in
// total and per client) before anything else reads it: see bounded.
func bounds(l Limits, reclaim *reclaimer) Middleware {
	return func(next http.Handler) http.Handler { return bounded(next, l, reclaim) }
}
