package auth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/auth"
)

// TestDiscovery: keys are found through OIDC discovery or RFC 8414 (the
// well-known segment before the issuer's path); a document naming another
// issuer is not trusted, and an unreachable IdP is a 503, not a 401.
func TestDiscovery(t *testing.T) {
	idp := newFakeIdP(t) // holds the keys; its JWKS is reused below
	tests := []struct {
		name   string
		serve  func(w http.ResponseWriter, r *http.Request, issuer string) bool
		status int
	}{
		{"OIDC discovery", func(w http.ResponseWriter, r *http.Request, issuer string) bool {
			if r.URL.Path != "/tenant/.well-known/openid-configuration" {
				return false
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": idp.issuer() + "/jwks"})
			return true
		}, 200},
		{"RFC 8414 only", func(w http.ResponseWriter, r *http.Request, issuer string) bool {
			if r.URL.Path != "/.well-known/oauth-authorization-server/tenant" {
				return false
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": idp.issuer() + "/jwks"})
			return true
		}, 200},
		{"metadata names another issuer", func(w http.ResponseWriter, r *http.Request, issuer string) bool {
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer + "/evil", "jwks_uri": idp.issuer() + "/jwks"})
			return true
		}, 503},
		{"IdP down", func(w http.ResponseWriter, r *http.Request, issuer string) bool {
			http.Error(w, "down", http.StatusBadGateway)
			return true
		}, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var issuer string
			as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !tt.serve(w, r, issuer) {
					http.NotFound(w, r)
				}
			}))
			defer as.Close()
			issuer = as.URL + "/tenant"
			rs := newRS(t, auth.Options{Issuer: issuer})
			srv := serve(t, rs)
			tok := mint(t, idp.current(), map[string]any{"iss": issuer, "sub": "alice", "aud": public + "/mcp",
				"exp": time.Now().Add(time.Hour).Unix()})
			got := call(t, srv, "/mcp", tok)
			if got.status != tt.status {
				t.Errorf("status %d; want %d (%s)", got.status, tt.status, got.body)
			}
		})
	}
}
