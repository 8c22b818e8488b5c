package asfront

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// serveToken is the token endpoint: authorization_code (with PKCE),
// refresh_token (rotated on every use; a reused one revokes its family)
// and, when Options.TokenExchangeAudiences lists any, token exchange
// (exchange.go).
func (f *Front) serveToken(w http.ResponseWriter, r *http.Request) {
	form, ok := f.publicClientForm(w, r)
	if !ok {
		return
	}
	var e *oauthError
	if form.Get("grant_type") == GrantTokenExchange && len(f.opts.TokenExchangeAudiences) > 0 {
		f.exchangeGrant(w, r, form)
		return
	}
	var g grantData
	var family string
	switch form.Get("grant_type") {
	case "authorization_code":
		g, family, e = f.codeGrant(r, form.Get("code"), form.Get("client_id"), form.Get("redirect_uri"), form.Get("code_verifier"))
	case "refresh_token":
		g, family, e = f.refreshGrant(r, form.Get("refresh_token"), form.Get("client_id"))
	default:
		e = oerr(400, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token", nil)
	}
	if e == nil {
		e = f.narrow(&g, form.Get("resource"), form.Get("scope"))
	}
	if e != nil {
		f.refuse(w, r, e)
		return
	}
	access, err := f.accessToken(r.Context(), g)
	if err != nil {
		f.refuse(w, r, oerr(500, "server_error", "signing the token failed", err))
		return
	}
	refresh := random(32)
	stored := g
	stored.Challenge, stored.RedirectURI = "", ""
	if err := f.putJSON(r.Context(), KindRefresh, hash(refresh), stored, f.opts.RefreshTokenTTL, family); err != nil {
		f.refuse(w, r, oerr(503, "temporarily_unavailable", "the store is unavailable", err))
		return
	}
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":  access,
		"token_type":    "Bearer",
		"expires_in":    int(f.opts.AccessTokenTTL.Seconds()),
		"refresh_token": refresh,
		"scope":         strings.Join(g.Scopes, " "),
	})
}

// publicClientForm reads the form of a request to /token or /revoke,
// which browsers' clients may call cross-origin; a request that
// authenticates a client is refused, since every client of this server is
// public (PKCE). ok is false when the refusal was written.
func (f *Front) publicClientForm(w http.ResponseWriter, r *http.Request) (form url.Values, ok bool) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	form, e := readForm(w, r)
	if e != nil {
		f.refuse(w, r, e)
		return nil, false
	}
	if r.Header.Get("Authorization") != "" || form.Get("client_secret") != "" {
		f.refuse(w, r, oerr(401, "invalid_client", "clients of this server are public: authenticate with PKCE, not a secret", nil))
		return nil, false
	}
	return form, true
}

// codeGrant redeems an authorization code. A code used twice revokes the
// tokens issued for it (OAuth 2.1 §4.1.3).
func (f *Front) codeGrant(r *http.Request, code, clientID, redirectURI, verifier string) (grantData, string, *oauthError) {
	var g grantData
	if code == "" {
		return g, "", oerr(400, "invalid_request", "code is required", nil)
	}
	rec, err := f.useJSON(r.Context(), KindCode, hash(code), &g)
	switch {
	case errors.Is(err, ErrNotFound):
		return g, "", oerr(400, "invalid_grant", "unknown authorization code", nil)
	case err != nil:
		return g, "", oerr(503, "temporarily_unavailable", "the store is unavailable", err)
	case rec.Used || rec.Revoked:
		if err := f.opts.Store.RevokeFamily(r.Context(), rec.Family); err != nil {
			return g, "", oerr(503, "temporarily_unavailable", "the store is unavailable", err)
		}
		return g, "", oerr(400, "invalid_grant", "authorization code already used; the tokens issued for it are revoked", nil)
	case !f.opts.Now().Before(rec.Expires):
		return g, "", oerr(400, "invalid_grant", "authorization code expired", nil)
	case clientID != g.ClientID:
		return g, "", oerr(400, "invalid_grant", "authorization code was issued to another client", fmt.Errorf("client_id %q", clientID))
	case redirectURI != g.RedirectURI:
		return g, "", oerr(400, "invalid_grant", "redirect_uri differs from the authorization request's", nil)
	case !pkceOK(verifier, g.Challenge):
		return g, "", oerr(400, "invalid_grant", "PKCE verification failed", nil)
	}
	return g, rec.Family, nil
}

// pkceOK checks an S256 code_verifier (RFC 7636 §4.6).
func pkceOK(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

// refreshGrant rotates a refresh token. A token used a second time means
// it leaked (or a client raced itself): the whole family is revoked, and
// its holder must sign in again (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2).
func (f *Front) refreshGrant(r *http.Request, token, clientID string) (grantData, string, *oauthError) {
	var g grantData
	if token == "" {
		return g, "", oerr(400, "invalid_request", "refresh_token is required", nil)
	}
	rec, err := f.useJSON(r.Context(), KindRefresh, hash(token), &g)
	switch {
	case errors.Is(err, ErrNotFound):
		return g, "", oerr(400, "invalid_grant", "unknown refresh token", nil)
	case err != nil:
		return g, "", oerr(503, "temporarily_unavailable", "the store is unavailable", err)
	case rec.Revoked:
		return g, "", oerr(400, "invalid_grant", "refresh token revoked", nil)
	case rec.Used:
		if err := f.opts.Store.RevokeFamily(r.Context(), rec.Family); err != nil {
			return g, "", oerr(503, "temporarily_unavailable", "the store is unavailable", err)
		}
		f.opts.Logger.Warn("oauth.proxy.refresh_reuse", "client_id", g.ClientID, "sub", g.Session.Subject)
		return g, "", oerr(400, "invalid_grant", "refresh token already used; every token of this grant is revoked", nil)
	case !f.opts.Now().Before(rec.Expires):
		return g, "", oerr(400, "invalid_grant", "refresh token expired", nil)
	case clientID != g.ClientID:
		return g, "", oerr(400, "invalid_grant", "refresh token was issued to another client", fmt.Errorf("client_id %q", clientID))
	}
	return g, rec.Family, nil
}

// narrow applies the token request's resource and scope: the resource, if
// given, must be the grant's; scopes may only shrink.
func (f *Front) narrow(g *grantData, resource, scope string) *oauthError {
	if resource != "" {
		canon, ok := f.opts.Resource(resource)
		if !ok || canon != g.Resource {
			return oerr(400, "invalid_target", "resource differs from the one authorized", nil)
		}
	}
	if scope != "" {
		want := strings.Fields(scope)
		for _, s := range want {
			if !slices.Contains(g.Scopes, s) {
				return oerr(400, "invalid_scope", "scope "+s+" was not granted", nil)
			}
		}
		g.Scopes = want
	}
	return nil
}
