package streamhttp

import (
	"context"
	"net/http"

	"github.com/bubbuild/bub-mcp/providers"
)

// callerState is the first link of an MCP route: it begins the request
// in the core (edge.Core.Begin) with the transport's state as its way
// back, and attaches both to the request once, so the links after it
// (auth, profile routing) fill in the caller and mcp-go's handlers find
// it.
func callerState(h *Handler, defaultProfile string) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			st := &httpRequest{h: h}
			ctx, caller := h.core.Begin(r.Context(), r.Header, st)
			*caller = providers.Connection{Transport: "http", Profile: defaultProfile}
			st.caller = caller
			next.ServeHTTP(w, r.WithContext(withHTTPRequest(ctx, st)))
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
