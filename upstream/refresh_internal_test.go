package upstream

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client/transport"
)

// A refresh finds the authorization server as a sign-in does: through
// the resource_metadata of the server's 401, here the only place that
// names it (no metadata at the well-known paths of the server's host), so
// the refresh token goes to that authorization server's token endpoint
// and never to the server.
func TestRefreshDiscoversLikeSignIn(t *testing.T) {
	var mu sync.Mutex
	var refreshed []string // refresh tokens the authorization server got
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			json.NewEncoder(w).Encode(map[string]any{"issuer": "http://" + r.Host, "authorization_endpoint": "http://" + r.Host + "/authorize",
				"token_endpoint": "http://" + r.Host + "/token", "response_types_supported": []string{"code"}})
		case "/token":
			r.ParseForm()
			mu.Lock()
			refreshed = append(refreshed, r.PostForm.Get("refresh_token"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": "at-2", "refresh_token": "rt-2", "token_type": "Bearer", "expires_in": 3600})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(as.Close)
	var ts *httptest.Server
	var toServer []string // paths the server got besides /mcp
	ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/mcp":
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+ts.URL+`/meta/resource"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case "/meta/resource":
			json.NewEncoder(w).Encode(map[string]any{"resource": ts.URL + "/mcp", "authorization_servers": []string{as.URL}})
		default:
			mu.Lock()
			toServer = append(toServer, r.Method+" "+r.URL.Path)
			mu.Unlock()
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	m := upstreamModule(t, t.TempDir(), "[upstreams.up]\nurl = \""+ts.URL+"/mcp\"\nauth = \"oauth\"\n")
	u := m.list()[0]
	oc := u.oauthConfig("")
	oc.ClientID = "c"
	tok, err := u.refresher(oc)(t.Context(), &tokenSet{Token: transport.Token{AccessToken: "at-1", RefreshToken: "rt-1", TokenType: "Bearer"}, ClientID: "c"})
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if tok.AccessToken != "at-2" {
		t.Errorf("refreshed access token %q; want at-2", tok.AccessToken)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"rt-1"}, refreshed); diff != "" {
		t.Errorf("refresh tokens at the authorization server (-want +got):\n%s", diff)
	}
	for _, p := range toServer {
		if p == "POST /token" {
			t.Errorf("the refresh token went to the server (%s)", p)
		}
	}
}
