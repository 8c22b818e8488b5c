package asfront_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bubbuild/bub-mcp/auth/asfront"
)

// TestRevoke: RFC 7009 at the front, against the real Hydra. A refresh
// token revoked by its client ends the whole grant; another client cannot
// revoke it; unknown tokens and access tokens are answered 200; a client
// secret is refused as at /token.
func TestRevoke(t *testing.T) {
	e := newEnv(t, nil)
	redirect := "http://127.0.0.1:9/cb"
	id := e.register(redirect)
	other := e.register(redirect)
	b := e.browser(redirect)
	// grant signs in and returns the flow and its first token response.
	grant := func(t *testing.T) (*flow, tokenResponse) {
		t.Helper()
		f := newFlow(id, redirect, e.endpoint)
		res, _, _ := e.authorize(b, f, true)
		status, body, tr := e.token(codeForm(f, e.code(res, f)))
		if status != 200 {
			t.Fatalf("token: %d %s", status, body)
		}
		return f, tr
	}
	revoke := func(form url.Values) (int, string) {
		t.Helper()
		return e.post(asfront.RevokePath, "application/x-www-form-urlencoded", form.Encode())
	}

	t.Run("revoked refresh token ends the grant", func(t *testing.T) {
		f, tr := grant(t)
		// Rotate once: revoking the current token must also end the
		// earlier one's family, which is the same grant.
		status, body, tr2 := e.token(refreshForm(f, tr.RefreshToken))
		if status != 200 {
			t.Fatalf("refresh: %d %s", status, body)
		}
		status, body = revoke(url.Values{"token": {tr2.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {id}})
		if diff := cmp.Diff(answer{200, ""}, answer{status, body}); diff != "" {
			t.Fatalf("revoke (-want +got):\n%s", diff)
		}
		status, body, _ = e.token(refreshForm(f, tr2.RefreshToken))
		want := answer{400, `{"error":"invalid_grant","error_description":"refresh token revoked"}`}
		if diff := cmp.Diff(want, answer{status, body}); diff != "" {
			t.Errorf("refresh after revocation (-want +got):\n%s", diff)
		}
		// Revoking again is not an error (RFC 7009 §2.2).
		if status, body := revoke(url.Values{"token": {tr2.RefreshToken}, "client_id": {id}}); status != 200 {
			t.Errorf("second revocation: %d %s; want 200", status, body)
		}
	})
	t.Run("another client's revocation is refused", func(t *testing.T) {
		f, tr := grant(t)
		status, body := revoke(url.Values{"token": {tr.RefreshToken}, "client_id": {other}})
		want := answer{400, `{"error":"invalid_grant","error_description":"the token was issued to another client"}`}
		if diff := cmp.Diff(want, answer{status, body}); diff != "" {
			t.Errorf("revoke by another client (-want +got):\n%s", diff)
		}
		status, body = revoke(url.Values{"token": {tr.RefreshToken}})
		if diff := cmp.Diff(want, answer{status, body}); diff != "" {
			t.Errorf("revoke without client_id (-want +got):\n%s", diff)
		}
		if status, body, _ := e.token(refreshForm(f, tr.RefreshToken)); status != 200 {
			t.Errorf("refresh after a refused revocation: %d %s; want 200", status, body)
		}
	})
	t.Run("access token and unknown token answer 200", func(t *testing.T) {
		f, tr := grant(t)
		for _, tok := range []string{tr.AccessToken, "no-such-token"} {
			if status, body := revoke(url.Values{"token": {tok}, "token_type_hint": {"access_token"}, "client_id": {id}}); status != 200 || body != "" {
				t.Errorf("revoke %.12s…: %d %s; want 200 and no body", tok, status, body)
			}
		}
		// Neither touched the grant.
		if status, body, _ := e.token(refreshForm(f, tr.RefreshToken)); status != 200 {
			t.Errorf("refresh after revoking the access token: %d %s; want 200", status, body)
		}
	})
	secret := answer{401, `{"error":"invalid_client","error_description":"clients of this server are public: authenticate with PKCE, not a secret"}`}
	t.Run("client secret", func(t *testing.T) {
		f, tr := grant(t)
		status, body := revoke(url.Values{"token": {tr.RefreshToken}, "client_id": {id}, "client_secret": {"s"}})
		if diff := cmp.Diff(secret, answer{status, body}); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if status, body, _ := e.token(refreshForm(f, tr.RefreshToken)); status != 200 {
			t.Errorf("refresh after a refused revocation: %d %s; want 200", status, body)
		}
	})
	t.Run("basic authentication", func(t *testing.T) {
		req, err := http.NewRequest("POST", e.srv.URL+asfront.RevokePath, strings.NewReader(url.Values{"token": {"x"}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(id, "s")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 401 {
			t.Errorf("basic auth: %d; want 401", res.StatusCode)
		}
	})
	t.Run("no token", func(t *testing.T) {
		status, body := revoke(url.Values{"client_id": {id}})
		want := answer{400, `{"error":"invalid_request","error_description":"token is required"}`}
		if diff := cmp.Diff(want, answer{status, body}); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("body too large", func(t *testing.T) {
		status, body := revoke(url.Values{"token": {strings.Repeat("x", 70<<10)}, "client_id": {id}})
		want := answer{400, `{"error":"invalid_request","error_description":"request body too large or unreadable"}`}
		if diff := cmp.Diff(want, answer{status, body}); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}
