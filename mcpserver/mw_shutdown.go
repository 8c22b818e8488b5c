package mcpserver

import "net/http"

// trackAnswers counts the POSTs being answered, so a shutdown
// (ServeHTTP) lets their answers be written before sessions and their
// streams close. A subscriptions/listen POST lives until the client
// leaves and is not counted.
func trackAnswers(posts *calls) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") != "subscriptions/listen" {
				posts.add()
				defer posts.done()
			}
			next.ServeHTTP(w, r)
		})
	}
}
