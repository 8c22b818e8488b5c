package streamhttp

import "net/http"

// Middleware is one link of the HTTP handler's chain (New):
// bounds, Host/Origin, CORS, the caller's state, auth, profile routing and
// shutdown tracking are each one, so a new concern (OAuth) is one more
// link rather than a branch inside another.
type Middleware func(http.Handler) http.Handler

// chain wraps h in links, the first outermost: chain(h, a, b) serves a
// request through a, then b, then h. A nil link is skipped (a concern the
// options turn off).
func chain(h http.Handler, links ...Middleware) http.Handler {
	for i := len(links) - 1; i >= 0; i-- {
		if links[i] != nil {
			h = links[i](h)
		}
	}
	return h
}
