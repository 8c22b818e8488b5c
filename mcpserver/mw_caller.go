package mcpserver

import (
	"context"
	"net/http"

	"github.com/bubbuild/bub-mcp/providers"
)

// callerState is the first link of an MCP route: it gives the request its
// state (one allocation: the caller as the transport knows it, the
// writer, the memo of its View) and attaches it once, so the links after
// it (auth, profile routing) fill in the caller and mcp-go's handlers
// find it.
func (s *Server) callerState(defaultProfile string) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			st := &httpRequest{srv: s, request: request{caller: providers.Connection{Transport: "http", Profile: defaultProfile}}}
			st.header = r.Header // for trace context (telemetry.go)
			next.ServeHTTP(w, r.WithContext(withHTTPRequest(r.Context(), st)))
		})
	}
}

// withHTTPRequest attaches an HTTP request's state to ctx, under the key
// requestFrom reads.
func withHTTPRequest(ctx context.Context, st *httpRequest) context.Context {
	return context.WithValue(ctx, requestKey{}, st)
}

// httpRequestFrom is the state callerState attached.
func httpRequestFrom(ctx context.Context) *httpRequest {
	st, _ := ctx.Value(requestKey{}).(*httpRequest)
	return st
}
