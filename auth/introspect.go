package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Introspection configures RFC 7662 token introspection, for issuers that
// hand out opaque (non-JWT) access tokens.
type Introspection struct {
	// URL is the introspection endpoint; empty means the issuer's
	// `introspection_endpoint` from discovery.
	URL string
	// ClientID and ClientSecret authenticate this resource server to the
	// endpoint (HTTP Basic, RFC 7662 §2.1). The caller reads the secret
	// from an environment variable; it is never logged or shown.
	ClientID     string
	ClientSecret string
}

// introspect asks the issuer about an opaque token and returns its claims
// (the response's members, which RFC 7662 §2.2 names like JWT claims).
func (rs *ResourceServer) introspect(ctx context.Context, token string) (map[string]any, *Error) {
	endpoint := rs.opts.Introspection.URL
	if endpoint == "" {
		d, err := rs.keys.discover(ctx)
		if err != nil {
			return nil, errorf(503, "", "the authorization server is unavailable", "%w", err)
		}
		if d.IntrospectionEndpoint == "" {
			return nil, invalidToken("unsupported token format",
				fmt.Errorf("opaque token, and the issuer publishes no introspection_endpoint"))
		}
		if err := secureEndpoint("introspection_endpoint", d.IntrospectionEndpoint); err != nil {
			return nil, errorf(503, "", "the authorization server is unavailable", "%w", err)
		}
		endpoint = d.IntrospectionEndpoint
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, errorf(503, "", "the authorization server is unavailable", "introspection request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if rs.opts.Introspection.ClientID != "" {
		req.SetBasicAuth(url.QueryEscape(rs.opts.Introspection.ClientID), url.QueryEscape(rs.opts.Introspection.ClientSecret))
	}
	resp, err := rs.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, errorf(503, "", "the authorization server is unavailable", "introspection: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errorf(503, "", "the authorization server is unavailable", "introspection: %s", resp.Status)
	}
	var claims map[string]any
	if err := decodeBounded(resp.Body, &claims); err != nil {
		return nil, errorf(503, "", "the authorization server is unavailable", "introspection response: %w", err)
	}
	if active, _ := claims["active"].(bool); !active {
		return nil, invalidToken("token is not active", nil)
	}
	// Ory Hydra returns a session's extra claims under "ext" rather than
	// as top-level members; lift them so rules see the same claims as in
	// Hydra's JWTs. Registered members already present win.
	if ext, ok := claims["ext"].(map[string]any); ok {
		for k, v := range ext {
			if _, taken := claims[k]; !taken {
				claims[k] = v
			}
		}
	}
	return claims, nil
}

// numericDate reads a JWT NumericDate claim (seconds since the epoch).
func numericDate(claims map[string]any, name string) (time.Time, bool, error) {
	v, ok := claims[name]
	if !ok || v == nil {
		return time.Time{}, false, nil
	}
	switch n := v.(type) {
	case float64:
		return time.Unix(int64(n), 0), true, nil
	case json.Number:
		f, err := n.Float64()
		if err != nil {
			return time.Time{}, false, fmt.Errorf("claim %s: %w", name, err)
		}
		return time.Unix(int64(f), 0), true, nil
	}
	return time.Time{}, false, fmt.Errorf("claim %s is not a number", name)
}

// audiences reads `aud`: a string or an array of strings (RFC 7519 §4.1.3).
func audiences(claims map[string]any) []string {
	switch v := claims["aud"].(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
