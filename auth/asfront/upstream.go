package asfront

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/bubbuild/bub-mcp/auth"
)

// maxUpstreamBytes bounds what the IdP sends (discovery, tokens; its JWKS
// is auth.KeySet's).
const maxUpstreamBytes = 1 << 20

// upstream is the real IdP, reached through OIDC discovery.
type upstream struct {
	opts   Upstream
	client *http.Client
	now    func() time.Time

	mu   sync.Mutex
	disc *oidcDiscovery
	keys *auth.KeySet // the IdP's, from disc's jwks_uri
}

type oidcDiscovery struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	JWKSURI               string `json:"jwks_uri"`
}

// discover reads the IdP's OIDC discovery document once; it must name the
// configured issuer exactly and https endpoints (http on loopback only).
func (u *upstream) discover(ctx context.Context) (*oidcDiscovery, error) {
	u.mu.Lock()
	d := u.disc
	u.mu.Unlock()
	if d != nil {
		return d, nil
	}
	var doc oidcDiscovery
	where := strings.TrimRight(u.opts.Issuer, "/") + "/.well-known/openid-configuration"
	if err := u.getJSON(ctx, where, &doc); err != nil {
		return nil, fmt.Errorf("asfront: discovering the IdP: %w", err)
	}
	if doc.Issuer != u.opts.Issuer {
		return nil, fmt.Errorf("asfront: %s names issuer %q, want %q", where, doc.Issuer, u.opts.Issuer)
	}
	for key, v := range map[string]string{"authorization_endpoint": doc.AuthorizationEndpoint, "token_endpoint": doc.TokenEndpoint, "jwks_uri": doc.JWKSURI} {
		if _, err := auth.CanonicalURL(key, v); err != nil {
			return nil, fmt.Errorf("asfront: the IdP's %s: %w", key, err)
		}
	}
	u.mu.Lock()
	if u.disc == nil {
		u.disc, u.keys = &doc, auth.NewKeySet(doc.Issuer, doc.JWKSURI, u.client, u.now)
	}
	d = u.disc
	u.mu.Unlock()
	return d, nil
}

// authorizeURL is where the user signs in: the IdP's authorization
// endpoint with bub-mcp's client, its own PKCE and nonce.
func (u *upstream) authorizeURL(ctx context.Context, redirectURI, state, nonce, verifier string) (string, error) {
	d, err := u.discover(ctx)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {u.opts.ClientID},
		"redirect_uri":          {redirectURI},
		"scope":                 {strings.Join(u.opts.Scopes, " ")},
		"state":                 {state},
		"nonce":                 {nonce},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	return withQuery(d.AuthorizationEndpoint, q), nil
}

// exchange trades the IdP's code for tokens and returns the verified ID
// token's claims.
func (u *upstream) exchange(ctx context.Context, code, redirectURI, verifier, nonce string) (map[string]any, error) {
	d, err := u.discover(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {redirectURI},
		"code_verifier": {verifier},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(u.opts.ClientID), url.QueryEscape(u.opts.ClientSecret))
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asfront: the IdP's token endpoint: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBytes))
	if err != nil {
		return nil, fmt.Errorf("asfront: the IdP's token endpoint: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		// The error code only: a description may echo what we sent.
		return nil, fmt.Errorf("asfront: the IdP's token endpoint: %s %s", resp.Status, e.Error)
	}
	var tok struct {
		IDToken string `json:"id_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.IDToken == "" {
		return nil, fmt.Errorf("asfront: the IdP's token response has no id_token (is openid among the scopes?)")
	}
	return u.verifyIDToken(ctx, tok.IDToken, nonce)
}

// verifyIDToken checks the ID token's signature against the IdP's JWKS
// and its iss, aud, exp and nonce (OIDC Core §3.1.3.7).
func (u *upstream) verifyIDToken(ctx context.Context, raw, nonce string) (map[string]any, error) {
	tok, err := jwt.ParseSigned(raw, auth.AllowedAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return nil, fmt.Errorf("asfront: the IdP's ID token is malformed: %v", err)
	}
	kid := tok.Headers[0].KeyID
	u.mu.Lock()
	set := u.keys
	u.mu.Unlock()
	keys, err := set.Keys(ctx, kid)
	if err != nil {
		return nil, fmt.Errorf("asfront: fetching the IdP's keys: %w", err)
	}
	if len(keys) == 0 {
		return nil, errors.New("asfront: the IdP's ID token names an unknown key")
	}
	var claims map[string]any
	var reg jwt.Claims
	verified := false
	for _, k := range keys {
		if tok.Claims(k.Key, &claims, &reg) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, errors.New("asfront: the IdP's ID token has no valid signature")
	}
	if err := reg.ValidateWithLeeway(jwt.Expected{Issuer: u.opts.Issuer, AnyAudience: jwt.Audience{u.opts.ClientID}, Time: u.now()}, time.Minute); err != nil {
		return nil, fmt.Errorf("asfront: the IdP's ID token: %w", err)
	}
	if n, _ := claims["nonce"].(string); n != nonce {
		return nil, errors.New("asfront: the IdP's ID token has the wrong nonce")
	}
	if reg.Subject == "" {
		return nil, errors.New("asfront: the IdP's ID token has no subject")
	}
	return claims, nil
}

func (u *upstream) getJSON(ctx context.Context, where string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := u.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", where, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxUpstreamBytes {
		return fmt.Errorf("GET %s: larger than %d bytes", where, maxUpstreamBytes)
	}
	return json.Unmarshal(body, v)
}
