package upstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client/transport"
)

// revocation is one request the fake authorization server's revocation
// endpoint received.
type revocation struct {
	Form  url.Values
	Basic string // user:password of HTTP Basic, "" without
}

// revokingAS is an upstream (401 on /mcp) whose authorization server
// serves RFC 8414 metadata, with a revocation endpoint when endpoint is
// set, which answers status and body.
func revokingAS(t *testing.T, endpoint bool, status int, body string) (*httptest.Server, func() []revocation) {
	t.Helper()
	var mu sync.Mutex
	var got []revocation
	var ts *httptest.Server
	ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			json.NewEncoder(w).Encode(map[string]any{"resource": ts.URL + "/mcp", "authorization_servers": []string{ts.URL}})
		case "/.well-known/oauth-authorization-server":
			md := map[string]any{"issuer": ts.URL, "authorization_endpoint": ts.URL + "/authorize", "token_endpoint": ts.URL + "/token",
				"response_types_supported": []string{"code"}}
			if endpoint {
				md["revocation_endpoint"] = ts.URL + "/revoke"
			}
			json.NewEncoder(w).Encode(md)
		case "/revoke":
			if err := r.ParseForm(); err != nil {
				t.Error(err)
			}
			rv := revocation{Form: r.PostForm}
			if u, p, ok := r.BasicAuth(); ok {
				rv.Basic = u + ":" + p
			}
			mu.Lock()
			got = append(got, rv)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(body))
		default:
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+ts.URL+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		}
	}))
	t.Cleanup(ts.Close)
	return ts, func() []revocation {
		mu.Lock()
		defer mu.Unlock()
		return append([]revocation(nil), got...)
	}
}

// Logout revokes each set's tokens at the authorization server (RFC
// 7009), authenticating its client as it registered, before deleting
// it; when the server refuses or offers no revocation endpoint the set
// is deleted anyway, and the result says why, naming no token.
func TestLogoutRevokes(t *testing.T) {
	sets := map[string]*tokenSet{
		"p1": {Token: transport.Token{AccessToken: "at-p1", RefreshToken: "rt-p1", TokenType: "Bearer"}, ClientID: "c-public"},
		"p2": {Token: transport.Token{RefreshToken: "rt-p2", TokenType: "Bearer"}, ClientID: "c-conf", ClientSecret: "s3cret", AuthMethod: "client_secret_basic"},
		"p3": {Token: transport.Token{RefreshToken: "rt-p3", TokenType: "Bearer"}, ClientID: "c-post", ClientSecret: "p0st", AuthMethod: "client_secret_post"},
	}
	all := []revocation{
		{Form: url.Values{"token": {"rt-p1"}, "token_type_hint": {"refresh_token"}, "client_id": {"c-public"}}},
		{Form: url.Values{"token": {"at-p1"}, "token_type_hint": {"access_token"}, "client_id": {"c-public"}}},
		{Form: url.Values{"token": {"rt-p2"}, "token_type_hint": {"refresh_token"}}, Basic: "c-conf:s3cret"},
		{Form: url.Values{"token": {"rt-p3"}, "token_type_hint": {"refresh_token"}, "client_id": {"c-post"}, "client_secret": {"p0st"}}},
	}
	refused := "revoking the refresh token: the authorization server answered 400 Bad Request (invalid_client)"
	for _, tc := range []struct {
		name     string
		endpoint bool
		status   int
		body     string
		want     []LogoutResult
		requests []revocation
	}{
		{"revoked", true, 200, "", []LogoutResult{{Principal: "p1", Revoked: true}, {Principal: "p2", Revoked: true}, {Principal: "p3", Revoked: true}}, all},
		{"refused", true, 400, `{"error":"invalid_client","error_description":"rt-p1 and s3cret are not welcome"}`,
			[]LogoutResult{{Principal: "p1", NotRevoked: refused}, {Principal: "p2", NotRevoked: refused}, {Principal: "p3", NotRevoked: refused}},
			[]revocation{all[0], all[2], all[3]}},
		{"no revocation endpoint", false, 0, "", []LogoutResult{
			{Principal: "p1", NotRevoked: "the authorization server offers no revocation endpoint"},
			{Principal: "p2", NotRevoked: "the authorization server offers no revocation endpoint"},
			{Principal: "p3", NotRevoked: "the authorization server offers no revocation endpoint"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, seen := revokingAS(t, tc.endpoint, tc.status, tc.body)
			m := upstreamModule(t, t.TempDir(), "[upstreams.up]\nurl = \""+ts.URL+"/mcp\"\nauth = \"oauth\"\n")
			c, err := m.creds()
			if err != nil {
				t.Fatal(err)
			}
			for p, set := range sets {
				if err := c.save(t.Context(), "up", p, set); err != nil {
					t.Fatal(err)
				}
			}
			got, err := m.Logout(t.Context(), "up", "", true, "tester")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Logout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.requests, seen()); diff != "" {
				t.Errorf("revocation requests (-want +got):\n%s", diff)
			}
			for p := range sets {
				if _, err := c.load(t.Context(), "up", p); !errors.Is(err, ErrNoCredentials) {
					t.Errorf("%s's set after logout: %v; want deleted", p, err)
				}
			}
		})
	}
}

// A configured client's secret is the one $client_secret_env holds now,
// not the one stored with each token set when it was issued: after the
// operator rotates it, a logout authenticates with the new one (as a
// connection's refreshes do, through the same withClient).
func TestRotatedClientSecret(t *testing.T) {
	ts, seen := revokingAS(t, true, 200, "")
	env := map[string]string{"UP_SECRET": "new-secret"}
	m := upstreamModuleEnv(t, t.TempDir(), "[upstreams.up]\nurl = \""+ts.URL+"/mcp\"\nauth = \"oauth\"\nclient_id = \"c-conf\"\nclient_secret_env = \"UP_SECRET\"\n",
		func(k string) string { return env[k] })
	c, err := m.creds()
	if err != nil {
		t.Fatal(err)
	}
	set := &tokenSet{Token: transport.Token{RefreshToken: "rt", TokenType: "Bearer"}, ClientID: "c-conf", ClientSecret: "old-secret", AuthMethod: "client_secret_basic"}
	if err := c.save(t.Context(), "up", "p1", set); err != nil {
		t.Fatal(err)
	}
	got, err := m.Logout(t.Context(), "up", "p1", false, "tester")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]LogoutResult{{Principal: "p1", Revoked: true}}, got); diff != "" {
		t.Errorf("Logout (-want +got):\n%s", diff)
	}
	want := []revocation{{Form: url.Values{"token": {"rt"}, "token_type_hint": {"refresh_token"}}, Basic: "c-conf:new-secret"}}
	if diff := cmp.Diff(want, seen()); diff != "" {
		t.Errorf("revocation requests (-want +got):\n%s", diff)
	}
}
