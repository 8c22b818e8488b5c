package auth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/bubbuild/bub-mcp/auth"
)

func ExampleCanonicalURL() {
	for _, u := range []string{"https://MCP.example.com:443", "https://mcp.example.com/mcp/"} {
		c, _ := auth.CanonicalURL("public_url", u)
		fmt.Println(c)
	}
	// Output:
	// https://mcp.example.com/
	// https://mcp.example.com/mcp
}

// A server answers the RFC 9728 metadata without a token and
// authenticates every other request, answering refusals with WriteError
// (the 401 challenge names the metadata).
func ExampleResourceServer_Authenticate() {
	rs, err := auth.NewResourceServer(auth.Options{
		Issuer:         "https://login.example.com",
		PublicURL:      "https://mcp.example.com",
		RequiredScopes: []string{"mcp"},
		Rules:          []auth.Rule{{Claim: "groups", Value: "eng", Profile: "dev"}},
	})
	if err != nil {
		panic(err)
	}
	meta := rs.MetadataHandler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, auth.WellKnownPath) {
			meta.ServeHTTP(w, r)
			return
		}
		p, err := rs.Authenticate(r.Context(), r)
		if err != nil {
			rs.WriteError(w, r, err)
			return
		}
		fmt.Fprintln(w, "hello", p.Name)
	})

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/mcp/p/dev", nil))
	fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/.well-known/oauth-protected-resource/mcp/p/dev", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// 401 Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/p/dev", scope="mcp"
	// 200 {"resource":"https://mcp.example.com/mcp/p/dev","authorization_servers":["https://login.example.com"],"scopes_supported":["mcp"],"bearer_methods_supported":["header"]}
}
