package streamhttp

import (
	"net"
	"net/http"

	"github.com/bubbuild/bub-mcp/auth/ratelimit"
)

// requestLimits applies the request-level [[limits]] rules (those without
// a tool glob) per principal: over its limit a request gets 429 with
// Retry-After before it is read. The principal is the caller's (a static
// token's name, an OAuth issuer#sub), else the client's address. It runs
// after auth and profile routing, so rules may name profiles. No rules:
// no link.
func requestLimits(l *ratelimit.Limits) Middleware {
	if l == nil {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return l.Middleware(func(r *http.Request) ratelimit.Subject {
			c := httpRequestFrom(r.Context()).caller
			p := c.Principal
			if p == "" {
				host, _, err := net.SplitHostPort(r.RemoteAddr)
				if err != nil {
					host = r.RemoteAddr
				}
				p = host
			}
			return ratelimit.Subject{Principal: p, Name: p, Profile: c.Profile}
		}, next)
	}
}
