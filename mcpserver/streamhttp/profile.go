package streamhttp

import (
	"fmt"
	"net/http"
)

// profileRoute serves the routes that name a profile in their path
// ({profile}): an unknown one is 404, one a token is not valid for 403;
// the caller then uses it. It runs after auth. Routes without a profile
// in the path get no link.
func profileRoute(fromPath bool, names []string) Middleware {
	if !fromPath {
		return nil
	}
	profiles := map[string]bool{}
	for _, p := range names {
		profiles[p] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			caller := httpRequestFrom(r.Context()).caller
			name := r.PathValue("profile")
			if !profiles[name] {
				http.Error(w, fmt.Sprintf("unknown profile %q", name), http.StatusNotFound)
				return
			}
			if caller.Principal != "" && name != caller.Profile {
				http.Error(w, fmt.Sprintf("forbidden: token %q is not valid for profile %q", caller.Principal, name), http.StatusForbidden)
				return
			}
			caller.Profile = name
			next.ServeHTTP(w, r)
		})
	}
}
