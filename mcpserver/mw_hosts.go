package mcpserver

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// hostOrigin (hostCheck) refuses requests whose Host or Origin is not a loopback name
// (nor an origin configured for CORS): a web page on another origin that
// resolves its name to 127.0.0.1 (DNS rebinding) must not reach a local
// server's tools. Callers enable it for loopback binds.
func hostOrigin(enabled bool, extra, origins []string) Middleware {
	if !enabled {
		return nil
	}
	return func(next http.Handler) http.Handler { return hostCheck(next, extra, origins) }
}

func hostCheck(next http.Handler, extra, origins []string) http.Handler {
	allowed := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	for _, h := range extra {
		allowed[strings.ToLower(h)] = true
	}
	corsOrigins := map[string]bool{}
	for _, o := range origins {
		corsOrigins[o] = true
	}
	ok := func(host string) bool {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.Trim(host, "[]"))
		return allowed[host] || strings.HasSuffix(host, ".localhost")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok(r.Host) {
			http.Error(w, "forbidden: Host is not a local name (DNS rebinding protection)", http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && origin != "null" && !corsOrigins[origin] {
			u, err := url.Parse(origin)
			if err != nil || !ok(u.Host) {
				http.Error(w, "forbidden: Origin is not a local origin (DNS rebinding protection)", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
