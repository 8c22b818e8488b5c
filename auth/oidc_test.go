package auth_test

import (
	"os"
	"testing"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/internal/oidctest"
)

func TestMain(m *testing.M) { os.Exit(oidctest.Run(m)) }

// TestRealIdP runs tokens from a real OpenID provider (Ory Hydra, real
// authorization-code flow with PKCE) through the resource server:
// discovery, JWKS, claims from the consent step, and the refusals a real
// IdP can produce; opaque tokens go through Hydra's RFC 7662 endpoint.
func TestRealIdP(t *testing.T) {
	idp := oidctest.Start(t)
	const (
		endpoint = public + "/mcp"
		dev      = public + "/mcp/p/dev"
		staff    = public + "/mcp/p/staff"
		other    = "https://other.example.com/mcp"
	)
	rs := newRS(t, auth.Options{
		Issuer:         idp.Issuer,
		RequiredScopes: []string{"mcp"},
		NameClaim:      "email",
		Rules: []auth.Rule{
			{Claim: "groups", Value: "eng", Profile: "dev"},
			{Claim: "email", Value: "@example.com", Profile: "staff"},
		},
		Introspection: &auth.Introspection{URL: idp.IntrospectionURL()},
	})
	srv := serve(t, rs)
	audiences := []string{endpoint, dev, staff, other}
	jwtClient := idp.NewClient(t, oidctest.ClientOptions{Audience: audiences, Scopes: []string{"mcp"}})
	opaqueClient := idp.NewClient(t, oidctest.ClientOptions{Audience: audiences, Scopes: []string{"mcp"}, Opaque: true})
	eng := map[string]any{"groups": []string{"eng"}, "email": "alice@example.com", "email_verified": true}

	const meta = `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp"`
	tests := []struct {
		name    string
		client  oidctest.Client
		req     oidctest.TokenRequest
		path    string
		status  int
		www     string
		profile string
	}{
		{"valid JWT", jwtClient, oidctest.TokenRequest{Subject: "alice", Scopes: []string{"mcp"}, Audience: []string{endpoint}, Claims: eng},
			"/mcp", 200, "", "dev"},
		{"valid JWT on a profile path", jwtClient, oidctest.TokenRequest{Subject: "alice", Scopes: []string{"mcp"}, Audience: []string{staff}, Claims: eng},
			"/mcp/p/staff", 200, "", "staff"},
		{"token for another profile's resource", jwtClient, oidctest.TokenRequest{Subject: "alice", Scopes: []string{"mcp"}, Audience: []string{dev}, Claims: eng},
			"/mcp/p/staff", 401, `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/p/staff", scope="mcp", error="invalid_token", error_description="token is for another resource"`, ""},
		{"valid opaque token (introspection)", opaqueClient, oidctest.TokenRequest{Subject: "alice", Scopes: []string{"mcp"}, Audience: []string{endpoint}, Claims: eng},
			"/mcp", 200, "", "dev"},
		{"wrong audience", jwtClient, oidctest.TokenRequest{Subject: "alice", Scopes: []string{"mcp"}, Audience: []string{other}, Claims: eng},
			"/mcp", 401, meta + `, error="invalid_token", error_description="token is for another resource"`, ""},
		{"opaque, wrong audience", opaqueClient, oidctest.TokenRequest{Subject: "alice", Scopes: []string{"mcp"}, Audience: []string{other}, Claims: eng},
			"/mcp", 401, meta + `, error="invalid_token", error_description="token is for another resource"`, ""},
		{"missing scope", jwtClient, oidctest.TokenRequest{Subject: "alice", Audience: []string{endpoint}, Claims: eng},
			"/mcp", 403, meta + `, error="insufficient_scope", error_description="the token lacks a required scope"`, ""},
		{"token for another profile", jwtClient, oidctest.TokenRequest{Subject: "bob", Scopes: []string{"mcp"}, Audience: []string{endpoint},
			Claims: map[string]any{"groups": []string{"eng"}, "email": "bob@elsewhere.org"}},
			"/mcp/p/staff", 403, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := idp.Token(t, tt.client, tt.req)
			got := call(t, srv, tt.path, tok.AccessToken)
			if got.status != tt.status || got.www != tt.www {
				t.Fatalf("status %d, WWW-Authenticate %q; want %d, %q (body %s)", got.status, got.www, tt.status, tt.www, got.body)
			}
			if tt.status != 200 {
				return
			}
			if got.p.Issuer != idp.Issuer || got.p.Subject != tt.req.Subject || got.p.Profile != tt.profile || !got.p.HasScope("mcp") || got.p.Expiry.IsZero() {
				t.Errorf("principal = %+v; want %s#%s in profile %q with scope mcp and an expiry", got.p, idp.Issuer, tt.req.Subject, tt.profile)
			}
			if got.p.Name != "alice@example.com" {
				t.Errorf("name = %q; want the email claim", got.p.Name)
			}
		})
	}
}
