package streamhttp

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
func callerState(h *Handler, defaultProfile string) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			st := &httpRequest{h: h, caller: providers.Connection{Transport: "http", Profile: defaultProfile}}
			next.ServeHTTP(w, r.WithContext(withHTTPRequest(r.Context(), st)))
		})
	}
}

type requestKey struct{}

// withHTTPRequest attaches an HTTP request's state to ctx.
func withHTTPRequest(ctx context.Context, st *httpRequest) context.Context {
	return context.WithValue(ctx, requestKey{}, st)
}

// httpRequestFrom is the state callerState attached.
func httpRequestFrom(ctx context.Context) *httpRequest {
	st, _ := ctx.Value(requestKey{}).(*httpRequest)
	return st
}
