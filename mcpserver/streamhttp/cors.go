package streamhttp

import "net/http"

// CORS headers: the methods MCP uses, the request headers its clients
// send (Accept and Content-Type: application/json are not all
// CORS-safelisted), and the response headers a page must read.
const (
	corsMethods = "GET, POST, DELETE"
	corsHeaders = "Content-Type, Authorization, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name"
	corsExposed = "Mcp-Session-Id, WWW-Authenticate, Retry-After"
	corsMaxAge  = "600" // seconds a browser may keep a preflight's answer
)

// corsFor (cors) lets web pages of the listed origins call the server: it answers
// their preflights itself (they carry no token, so /mcp would refuse
// them with 401 or 405) and marks every response to them, refusals
// included, as readable by the page. No credentials are allowed: clients
// send their bearer token in Authorization, never a cookie. mcp-go's own
// CORS (WithStreamableHTTPCORS) would not do: it runs inside its handler,
// after our auth, Origin and method checks, and answers every origin's
// preflight with 204.
func corsFor(origins []string) Middleware {
	if len(origins) == 0 {
		return nil
	}
	return func(next http.Handler) http.Handler { return cors(next, origins) }
}

func cors(next http.Handler, origins []string) http.Handler {
	allowed := map[string]bool{}
	for _, o := range origins {
		allowed[o] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if !allowed[origin] {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Allow-Origin", origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposed)
		next.ServeHTTP(w, r)
	})
}
