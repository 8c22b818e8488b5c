package asfront

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/bubbuild/bub-mcp/auth"
)

// RFC 8693 names.
const (
	// GrantTokenExchange is the token-exchange grant_type.
	GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	// TokenTypeAccessToken is the subject_token_type (and
	// issued_token_type) of an OAuth access token.
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	// maxSubjectToken bounds a subject token (bearer headers are bounded
	// alike).
	maxSubjectToken = 16 << 10
)

// exchangeGrant is RFC 8693 token exchange within the front's own trust
// domain: the subject token must be an access token the front itself
// signed, still valid, for one of this server's resources; the target
// (resource, else audience) must be one of Options.TokenExchangeAudiences.
// The new token names the same subject with the same claims, client and
// scopes (or fewer), for the target alone, and lives no longer than the
// subject token. The requester needs no client authentication: what it
// trades is a token it was given, and the result is good only at a server
// the operator listed. It gets no refresh token.
func (f *Front) exchangeGrant(w http.ResponseWriter, r *http.Request, form url.Values) {
	claims, e := f.checkExchange(r.Context(), form)
	if e != nil {
		f.refuse(w, r, e)
		return
	}
	access, err := f.sign(r.Context(), claims)
	if err != nil {
		f.refuse(w, r, oerr(500, "server_error", "signing the token failed", err))
		return
	}
	exp, _ := claims["exp"].(int64)
	f.opts.Logger.Info("oauth.proxy.token_exchange", "sub", claims["sub"], "client_id", claims["client_id"], "aud", claims["aud"])
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":      access,
		"issued_token_type": TokenTypeAccessToken,
		"token_type":        "Bearer",
		"expires_in":        exp - f.opts.Now().Unix(),
		"scope":             claims["scope"],
	})
}

// checkExchange checks a token-exchange request and returns the claims of
// the token to issue.
func (f *Front) checkExchange(ctx context.Context, form url.Values) (map[string]any, *oauthError) {
	switch {
	case form.Get("subject_token") == "":
		return nil, oerr(400, "invalid_request", "subject_token is required", nil)
	case form.Get("subject_token_type") != TokenTypeAccessToken:
		return nil, oerr(400, "invalid_request", "subject_token_type must be "+TokenTypeAccessToken, nil)
	case form.Get("actor_token") != "":
		return nil, oerr(400, "invalid_request", "actor_token is not supported", nil)
	case form.Get("requested_token_type") != "" && form.Get("requested_token_type") != TokenTypeAccessToken:
		return nil, oerr(400, "invalid_request", "requested_token_type must be "+TokenTypeAccessToken, nil)
	}
	target := form.Get("resource")
	if target == "" {
		target = form.Get("audience")
	}
	if target == "" {
		return nil, oerr(400, "invalid_target", "resource (or audience) is required: the server the token is for", nil)
	}
	if !slices.Contains(f.opts.TokenExchangeAudiences, target) {
		return nil, oerr(400, "invalid_target", "resource is not a server this authorization server exchanges tokens for", fmt.Errorf("resource %q", target))
	}
	subject, e := f.ownToken(form.Get("subject_token"))
	if e != nil {
		return nil, e
	}
	now := f.opts.Now()
	exp := now.Add(f.opts.AccessTokenTTL)
	if subject.exp.Before(exp) {
		exp = subject.exp
	}
	scope, _ := subject.claims["scope"].(string)
	if want := form.Get("scope"); want != "" {
		granted := strings.Fields(scope)
		for _, s := range strings.Fields(want) {
			if !slices.Contains(granted, s) {
				return nil, oerr(400, "invalid_scope", "scope "+s+" was not granted to the subject token", nil)
			}
		}
		scope = want
	}
	claims := maps.Clone(subject.claims)
	maps.Copy(claims, map[string]any{
		"iss": f.opts.Issuer, "aud": target, "scope": scope,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": exp.Unix(), "jti": random(16),
	})
	return claims, nil
}

// subjectToken is a verified access token of the front's.
type subjectToken struct {
	claims map[string]any
	exp    time.Time
}

// ownToken verifies that token is an access token this front signed (with
// a key its ring still publishes), unexpired, for one of this server's
// own resources: an exchanged token, for another server, is not traded
// again.
func (f *Front) ownToken(token string) (*subjectToken, *oauthError) {
	bad := func(desc string, cause error) (*subjectToken, *oauthError) {
		return nil, oerr(400, "invalid_grant", desc, cause)
	}
	if len(token) > maxSubjectToken {
		return bad("subject token is not an access token of this server", fmt.Errorf("%d bytes", len(token)))
	}
	tok, err := jwt.ParseSigned(token, auth.AllowedAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return bad("subject token is not an access token of this server", err)
	}
	var raw json.RawMessage
	verified := false
	keys := f.opts.Keys.JWKS()
	for _, k := range keys.Key(tok.Headers[0].KeyID) {
		if tok.Claims(k.Key, &raw) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return bad("subject token is not an access token of this server", fmt.Errorf("no key of the ring verifies it (kid %q)", tok.Headers[0].KeyID))
	}
	var claims map[string]any
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&claims); err != nil {
		return bad("subject token is not an access token of this server", err)
	}
	if iss, _ := claims["iss"].(string); iss != f.opts.Issuer {
		return bad("subject token is not an access token of this server", fmt.Errorf("iss %q", iss))
	}
	if sub, _ := claims["sub"].(string); sub == "" {
		return bad("subject token has no subject", nil)
	}
	n, _ := claims["exp"].(json.Number)
	sec, err := n.Int64()
	if err != nil {
		return bad("subject token has no valid expiry", err)
	}
	exp := time.Unix(sec, 0)
	if !f.opts.Now().Before(exp) {
		return bad("subject token expired", nil)
	}
	aud, _ := claims["aud"].(string)
	if canon, ok := f.opts.Resource(aud); !ok || canon != aud {
		return bad("subject token is not for this server", fmt.Errorf("aud %q", aud))
	}
	// The numbers go back out as they came (iat, exp are set anew).
	for k, v := range claims {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				claims[k] = i
			} else if fl, err := n.Float64(); err == nil {
				claims[k] = fl
			}
		}
	}
	return &subjectToken{claims: claims, exp: exp}, nil
}
