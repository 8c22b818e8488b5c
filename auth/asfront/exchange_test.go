package asfront_test

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/asfront"
)

const upstreamMCP = "https://up.example/mcp"

func exchangeForm(subject, resource string) url.Values {
	return url.Values{"grant_type": {asfront.GrantTokenExchange}, "subject_token": {subject},
		"subject_token_type": {asfront.TokenTypeAccessToken}, "resource": {resource}}
}

// TestTokenExchange trades alice's access token for one whose audience is
// an allowed upstream, with her subject, client and scopes, that the
// upstream's resource server accepts and this server's refuses; and
// checks each refusal's status and body.
func TestTokenExchange(t *testing.T) {
	e := newEnv(t, func(o *asfront.Options) { o.TokenExchangeAudiences = []string{upstreamMCP} })
	redirect := "http://127.0.0.1:9/cb"
	id := e.register(redirect)
	f := newFlow(id, redirect, e.endpoint)
	res, _, _ := e.authorize(e.browser(redirect), f, true)
	status, body, tr := e.token(codeForm(f, e.code(res, f)))
	if status != 200 {
		t.Fatalf("token: %d %s", status, body)
	}

	status, body = e.post(asfront.TokenPath, "application/x-www-form-urlencoded", exchangeForm(tr.AccessToken, upstreamMCP).Encode())
	var out struct {
		AccessToken     string `json:"access_token"`
		IssuedTokenType string `json:"issued_token_type"`
		TokenType       string `json:"token_type"`
		ExpiresIn       int    `json:"expires_in"`
		RefreshToken    string `json:"refresh_token"`
	}
	if status != 200 {
		t.Fatalf("exchange: %d %s", status, body)
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	if out.IssuedTokenType != asfront.TokenTypeAccessToken || out.TokenType != "Bearer" || out.RefreshToken != "" ||
		out.ExpiresIn <= 0 || out.ExpiresIn > int(asfront.DefaultAccessTokenTTL.Seconds()) {
		t.Errorf("exchange answer %s", body)
	}
	up, err := auth.NewResourceServer(auth.Options{Issuer: e.srv.URL, PublicURL: "https://up.example", JWKSURL: e.front.JWKSURL(),
		HTTPClient: e.front.KeysClient(), RequiredScopes: []string{"mcp"}, Now: e.now})
	if err != nil {
		t.Fatal(err)
	}
	p, err := up.Verify(t.Context(), out.AccessToken, upstreamMCP)
	if err != nil {
		t.Fatalf("the upstream refused the exchanged token: %v", err)
	}
	want := &auth.Principal{Issuer: e.srv.URL, Subject: "alice", Name: "alice@example.com", ClientID: id, Scopes: []string{"mcp"}}
	if diff := cmp.Diff(want, p, cmpIgnoreExpiry); diff != "" {
		t.Errorf("upstream principal (-want +got):\n%s", diff)
	}
	if _, err := e.verify(out.AccessToken); err == nil {
		t.Errorf("this server accepted a token exchanged for the upstream")
	}

	other, err := auth.NewKeyRing(t.Context(), auth.KeyRingOptions{Store: auth.FileKeyStore{Path: filepath.Join(t.TempDir(), "other.json")}})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Sign(map[string]any{"iss": e.srv.URL, "sub": "mallory", "aud": e.endpoint, "exp": time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	with := func(f url.Values, k, v string) url.Values {
		f.Set(k, v)
		return f
	}
	cases := []struct {
		name string
		form url.Values
		want answer
	}{
		{"wrong subject_token_type", with(exchangeForm(tr.AccessToken, upstreamMCP), "subject_token_type", "urn:ietf:params:oauth:token-type:id_token"),
			answer{400, `{"error":"invalid_request","error_description":"subject_token_type must be urn:ietf:params:oauth:token-type:access_token"}`}},
		{"no subject token", exchangeForm("", upstreamMCP),
			answer{400, `{"error":"invalid_request","error_description":"subject_token is required"}`}},
		{"target not allowed", exchangeForm(tr.AccessToken, "https://elsewhere.example/mcp"),
			answer{400, `{"error":"invalid_target","error_description":"resource is not a server this authorization server exchanges tokens for"}`}},
		{"no target", exchangeForm(tr.AccessToken, ""),
			answer{400, `{"error":"invalid_target","error_description":"resource (or audience) is required: the server the token is for"}`}},
		{"unknown subject token", exchangeForm("not-a-token", upstreamMCP),
			answer{400, `{"error":"invalid_grant","error_description":"subject token is not an access token of this server"}`}},
		{"refresh token as subject", exchangeForm(tr.RefreshToken, upstreamMCP),
			answer{400, `{"error":"invalid_grant","error_description":"subject token is not an access token of this server"}`}},
		{"foreign subject token", exchangeForm(foreign, upstreamMCP),
			answer{400, `{"error":"invalid_grant","error_description":"subject token is not an access token of this server"}`}},
		{"exchanged token exchanged again", exchangeForm(out.AccessToken, upstreamMCP),
			answer{400, `{"error":"invalid_grant","error_description":"subject token is not for this server"}`}},
		{"wider scope", with(exchangeForm(tr.AccessToken, upstreamMCP), "scope", "mcp admin"),
			answer{400, `{"error":"invalid_scope","error_description":"scope admin was not granted to the subject token"}`}},
		{"actor token", with(exchangeForm(tr.AccessToken, upstreamMCP), "actor_token", tr.AccessToken),
			answer{400, `{"error":"invalid_request","error_description":"actor_token is not supported"}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.post(asfront.TokenPath, "application/x-www-form-urlencoded", tc.form.Encode())
			if diff := cmp.Diff(tc.want, answer{status, body}); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}

	// Last, as it moves the clock: an expired subject token.
	e.skew.Store(int64(asfront.DefaultAccessTokenTTL.Seconds()) + 1)
	status, body = e.post(asfront.TokenPath, "application/x-www-form-urlencoded", exchangeForm(tr.AccessToken, upstreamMCP).Encode())
	if diff := cmp.Diff(answer{400, `{"error":"invalid_grant","error_description":"subject token expired"}`}, answer{status, body}); diff != "" {
		t.Errorf("expired subject token (-want +got):\n%s", diff)
	}
}

// TestTokenExchangeOff: without allowed audiences the grant does not
// exist.
func TestTokenExchangeOff(t *testing.T) {
	e := newEnv(t, nil)
	status, body := e.post(asfront.TokenPath, "application/x-www-form-urlencoded", exchangeForm("x", upstreamMCP).Encode())
	want := `{"error":"unsupported_grant_type","error_description":"grant_type must be authorization_code or refresh_token"}`
	if status != 400 || body != want {
		t.Errorf("token exchange without token_exchange_audiences: %d %s; want 400 %s", status, body, want)
	}
}
