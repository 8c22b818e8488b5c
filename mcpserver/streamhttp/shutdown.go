package streamhttp

import (
	"net/http"

	"github.com/bubbuild/bub-mcp/mcpserver/internal/edge"
)

// trackAnswers counts the POSTs being answered, so a shutdown
// (Handler.Serve) lets their answers be written before sessions and their
// streams close. A subscriptions/listen POST lives until the client
// leaves and is not counted.
func trackAnswers(posts *edge.Calls) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") != "subscriptions/listen" {
				posts.Add()
				defer posts.Done()
			}
			next.ServeHTTP(w, r)
		})
	}
}
