// Package hostcheck is the DNS-rebinding guard of servers that listen on
// loopback (the MCP HTTP transport and the operator console): a request
// whose Host, or Origin, is not a local name is refused, so a web page on
// another origin whose name resolves to 127.0.0.1 cannot reach them.
package hostcheck

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Handler refuses requests whose Host or Origin is not localhost,
// 127.0.0.1, ::1, a *.localhost name or one of extra (names an operator
// allows, case-insensitive); an Origin listed in origins (exact, for
// CORS) passes too. An Origin of "null" is left to the handler (a form
// POST under a strict referrer policy sends it; CSRF tokens decide).
func Handler(next http.Handler, extra, origins []string) http.Handler {
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

// Loopback reports whether host (a name or an IP, brackets allowed, no
// port) is this machine only: localhost, or an address in 127.0.0.0/8 or
// ::1. Every loopback question in bub-mcp (a listen address, an http:// URL
// allowed without TLS) asks it, so they cannot disagree.
func Loopback(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
