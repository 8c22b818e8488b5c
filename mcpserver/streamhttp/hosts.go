package streamhttp

import (
	"net/http"

	"github.com/bubbuild/bub-mcp/internal/hostcheck"
)

// hostOrigin refuses requests whose Host or Origin is not a loopback name
// (nor an origin configured for CORS): a web page on another origin that
// resolves its name to 127.0.0.1 (DNS rebinding) must not reach a local
// server's tools. Callers enable it for loopback binds.
func hostOrigin(enabled bool, extra, origins []string) Middleware {
	if !enabled {
		return nil
	}
	return func(next http.Handler) http.Handler { return hostcheck.Handler(next, extra, origins) }
}
