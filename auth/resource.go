package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// AllowedAlgorithms are the JWS algorithms an access token may be signed
// with: asymmetric only. `none` and the HMAC family are refused before any
// key is looked at, which also defeats the "HS256 signed with the public
// key" confusion.
var AllowedAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.PS256, jose.EdDSA}

// Defaults for Options' zero values.
const (
	DefaultClockSkew          = 60 * time.Second
	MaxClockSkew              = 5 * time.Minute
	DefaultKeyRefreshInterval = time.Hour
	DefaultMinRefetchInterval = 30 * time.Second
	DefaultEndpointPath       = "/mcp"
	DefaultProfilePathPrefix  = "/mcp/p/"
)

// Options configure a ResourceServer. It mirrors `[auth.oauth]` and
// `[server] public_url`; zero values mean the defaults named per field.
type Options struct {
	// Issuer is the authorization server's issuer identifier, exactly as it
	// appears in its metadata and in tokens' `iss`. Required.
	Issuer string
	// PublicURL is the canonical URL clients reach this server at (behind
	// a proxy: the proxy's URL), e.g. https://mcp.example.com. Required.
	PublicURL string
	// EndpointPath is the MCP endpoint's path; "" means "/mcp".
	EndpointPath string
	// ProfilePathPrefix is where profile endpoints live
	// (<prefix><profile>); "" means "/mcp/p/".
	ProfilePathPrefix string
	// RequiredScopes must all be in the token; a token without them gets
	// 403 insufficient_scope. They are also advertised in the metadata and
	// the challenge's `scope`.
	RequiredScopes []string
	// Audience lists the `aud` values accepted; empty means this server's
	// own resource identifiers (the request's resource, the endpoint and
	// PublicURL), canonicalised (RFC 8707: a token for another resource is
	// refused).
	Audience []string
	// NameClaim names the claim Principal.Name comes from (e.g. "email",
	// "preferred_username"); "" means "preferred_username", then "email",
	// then "name". The subject is the fallback.
	NameClaim string
	// Rules map claims to profiles (see Rule).
	Rules []Rule
	// JWKSURL fixes the key set URL; "" means the issuer's `jwks_uri` from
	// discovery.
	JWKSURL string
	// Introspection, when non-nil, makes opaque tokens acceptable through
	// RFC 7662. Nil means only JWT access tokens.
	Introspection *Introspection
	// ClockSkew is the leeway for exp/nbf/iat; 0 means 60 s, at most 5 min.
	ClockSkew time.Duration
	// KeyRefreshInterval is how long fetched keys are used before the JWKS
	// is fetched again; 0 means 1 h.
	KeyRefreshInterval time.Duration
	// MinRefetchInterval is the least time between two JWKS fetches, so
	// tokens with unknown key ids cannot make us hammer the issuer; 0 means
	// 30 s.
	MinRefetchInterval time.Duration
	// ResourceName is the human-readable name in the metadata; optional.
	ResourceName string
	// HTTPClient talks to the issuer; nil means a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now. Tests pass a fake one.
	Now func() time.Time
}

// ResourceServer authenticates bearer tokens for this MCP server. It is
// safe for concurrent use; one serves the whole process.
type ResourceServer struct {
	opts      Options
	root      string // canonical PublicURL
	origin    string // scheme://host of PublicURL
	basePath  string // PublicURL's path, "" for the root
	audiences []string
	keys      *keyCache
	verified  verifiedCache
}

// NewResourceServer checks opts and returns a ResourceServer. It does not
// contact the issuer: discovery and keys are fetched on first use, so a
// server starts while its IdP is down and recovers when it is back.
func NewResourceServer(opts Options) (*ResourceServer, error) {
	if opts.Issuer == "" {
		return nil, fmt.Errorf("auth: issuer is required")
	}
	if u, err := url.Parse(opts.Issuer); err != nil || !u.IsAbs() || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("auth: issuer %q: want an absolute URL without query or fragment", opts.Issuer)
	}
	if opts.PublicURL == "" {
		return nil, fmt.Errorf("auth: public_url is required with OAuth (the URL clients use to reach this server)")
	}
	root, err := CanonicalURL("public_url", opts.PublicURL)
	if err != nil {
		return nil, err
	}
	if opts.EndpointPath == "" {
		opts.EndpointPath = DefaultEndpointPath
	}
	if opts.ProfilePathPrefix == "" {
		opts.ProfilePathPrefix = DefaultProfilePathPrefix
	}
	if !strings.HasPrefix(opts.EndpointPath, "/") || !strings.HasPrefix(opts.ProfilePathPrefix, "/") {
		return nil, fmt.Errorf("auth: endpoint path %q and profile prefix %q must start with /", opts.EndpointPath, opts.ProfilePathPrefix)
	}
	if !strings.HasSuffix(opts.ProfilePathPrefix, "/") {
		opts.ProfilePathPrefix += "/"
	}
	for i, r := range opts.Rules {
		if err := r.validate(i); err != nil {
			return nil, err
		}
	}
	for _, s := range opts.RequiredScopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			return nil, fmt.Errorf("auth: required_scopes: %q is not a scope token", s)
		}
	}
	switch {
	case opts.ClockSkew == 0:
		opts.ClockSkew = DefaultClockSkew
	case opts.ClockSkew < 0 || opts.ClockSkew > MaxClockSkew:
		return nil, fmt.Errorf("auth: clock_skew %v: want between 0 and %v", opts.ClockSkew, MaxClockSkew)
	}
	if opts.KeyRefreshInterval <= 0 {
		opts.KeyRefreshInterval = DefaultKeyRefreshInterval
	}
	if opts.MinRefetchInterval <= 0 {
		opts.MinRefetchInterval = DefaultMinRefetchInterval
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Introspection != nil {
		in := *opts.Introspection
		opts.Introspection = &in
	}
	opts.RequiredScopes = slices.Clone(opts.RequiredScopes)
	opts.Rules = slices.Clone(opts.Rules)
	u, _ := url.Parse(root)
	rs := &ResourceServer{
		opts:     opts,
		root:     root,
		origin:   u.Scheme + "://" + u.Host,
		basePath: strings.TrimRight(u.Path, "/"),
		keys: &keyCache{
			issuer:          opts.Issuer,
			jwksURL:         opts.JWKSURL,
			client:          opts.HTTPClient,
			now:             opts.Now,
			refreshInterval: opts.KeyRefreshInterval,
			minRefetch:      opts.MinRefetchInterval,
		},
	}
	for _, a := range opts.Audience {
		c, err := CanonicalURL("audience", a)
		if err != nil {
			// Audiences need not be URLs (Entra's api://…, a client id).
			c = a
		}
		rs.audiences = append(rs.audiences, c)
	}
	return rs, nil
}

// Authenticate checks the request's bearer token for the resource at path
// (the request path: the endpoint or a profile path) and returns the
// Principal, with Profile chosen for that path. A refusal is an *Error.
func (rs *ResourceServer) Authenticate(ctx context.Context, r *http.Request) (*Principal, error) {
	resource, requested, ok := rs.ResourceFor(r.URL.Path)
	if !ok {
		// Not an MCP endpoint (e.g. /metrics): the token must be for the
		// endpoint, and only the default profile is implied.
		resource = join(rs.root, rs.opts.EndpointPath)
	}
	token, e := bearer(r)
	if e != nil {
		return nil, e
	}
	p, err := rs.Verify(ctx, token, resource)
	if err != nil {
		return nil, err
	}
	profile, e := choose(len(rs.opts.Rules) > 0, p.Profiles, requested)
	if e != nil {
		return nil, e
	}
	p.Profile = profile
	return p, nil
}

// bearer extracts the token from the Authorization header (RFC 6750 §2.1;
// the header method only: tokens in query strings end up in logs).
func bearer(r *http.Request) (string, *Error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", &Error{Status: 401, Description: "a bearer token is required"}
	}
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || len(token) > 16<<10 {
		return "", invalidToken("malformed Authorization header", nil)
	}
	return token, nil
}

// Verify checks token (a JWT, or an opaque token when introspection is on)
// for resource and returns its Principal with Profiles filled in but no
// Profile chosen. A refusal is an *Error.
func (rs *ResourceServer) Verify(ctx context.Context, token, resource string) (*Principal, error) {
	var claims map[string]any
	if strings.Count(token, ".") == 2 {
		c, e := rs.verifyJWT(ctx, token)
		if e != nil {
			return nil, e
		}
		claims = c
	} else if rs.opts.Introspection != nil {
		c, e := rs.introspect(ctx, token)
		if e != nil {
			return nil, e
		}
		claims = c
	} else {
		return nil, invalidToken("unsupported token format", fmt.Errorf("not a JWT, and introspection is off"))
	}
	return rs.principal(claims, resource)
}

// verifyJWT checks the signature against the issuer's keys and returns the
// claims; the registered claims are checked by principal.
func (rs *ResourceServer) verifyJWT(ctx context.Context, token string) (map[string]any, *Error) {
	sum := sha256.Sum256([]byte(token))
	now := rs.opts.Now()
	if v, ok := rs.verified.get(sum, now); ok {
		// The key set must still be the one it was verified with; the
		// look-up refreshes stale keys as an uncached check would.
		if keys, gen, err := rs.keys.lookup(ctx, v.kid); err == nil && len(keys) > 0 && gen == v.keys {
			return v.claims, nil
		}
		rs.verified.drop(sum)
	}
	claims, kid, gen, e := rs.checkJWT(ctx, token)
	if e != nil {
		return nil, e
	}
	if exp, ok, err := numericDate(claims, "exp"); err == nil && ok {
		rs.verified.put(sum, verified{claims: claims, kid: kid, keys: gen, exp: exp}, now)
	}
	return claims, nil
}

// checkJWT verifies the signature and returns the claims, with the key id
// and the key set's generation it was verified with.
func (rs *ResourceServer) checkJWT(ctx context.Context, token string) (claims map[string]any, kid string, gen int, e *Error) {
	tok, err := jwt.ParseSigned(token, AllowedAlgorithms)
	if err != nil {
		return nil, "", 0, invalidToken("malformed or unsupported token", err)
	}
	if len(tok.Headers) != 1 {
		return nil, "", 0, invalidToken("malformed or unsupported token", fmt.Errorf("%d signatures", len(tok.Headers)))
	}
	h := tok.Headers[0]
	keys, gen, err := rs.keys.lookup(ctx, h.KeyID)
	if err != nil {
		return nil, "", 0, errorf(503, "", "the authorization server is unavailable", "%w", err)
	}
	if len(keys) == 0 {
		return nil, "", 0, invalidToken("unknown signing key", fmt.Errorf("no key with id %q", h.KeyID))
	}
	var raw json.RawMessage
	for _, k := range keys {
		// A key that names its algorithm is used with that one only.
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			continue
		}
		if err = tok.Claims(k.Key, &raw); err == nil {
			break
		}
	}
	if err != nil || raw == nil {
		return nil, "", 0, invalidToken("invalid signature", err)
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, "", 0, invalidToken("malformed claims", err)
	}
	return claims, h.KeyID, gen, nil
}

// principal checks the registered claims and builds the Principal.
func (rs *ResourceServer) principal(claims map[string]any, resource string) (*Principal, error) {
	now := rs.opts.Now()
	skew := rs.opts.ClockSkew
	if iss, _ := claims["iss"].(string); iss != rs.opts.Issuer {
		return nil, invalidToken("token from another issuer", fmt.Errorf("iss %q", iss))
	}
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return nil, invalidToken("token has no subject", nil)
	}
	exp, ok, err := numericDate(claims, "exp")
	if err != nil || !ok {
		return nil, invalidToken("token has no valid expiry", err)
	}
	if !now.Before(exp.Add(skew)) {
		return nil, invalidToken("token expired", nil)
	}
	if nbf, ok, err := numericDate(claims, "nbf"); err != nil || (ok && now.Add(skew).Before(nbf)) {
		return nil, invalidToken("token not yet valid", err)
	}
	if iat, ok, err := numericDate(claims, "iat"); err != nil || (ok && now.Add(skew).Before(iat)) {
		return nil, invalidToken("token issued in the future", err)
	}
	if !rs.audienceOK(audiences(claims), resource) {
		return nil, invalidToken("token is for another resource", nil)
	}
	scopes := scopesOf(claims)
	for _, s := range rs.opts.RequiredScopes {
		if !slices.Contains(scopes, s) {
			return nil, &Error{Status: 403, Code: CodeInsufficientScope,
				Description: "the token lacks a required scope", Err: fmt.Errorf("missing scope %q", s)}
		}
	}
	p := &Principal{
		Issuer:   rs.opts.Issuer,
		Subject:  sub,
		Name:     rs.name(claims, sub),
		Scopes:   scopes,
		Expiry:   exp,
		Profiles: profilesFor(rs.opts.Rules, claims, scopes),
	}
	for _, k := range []string{"client_id", "azp"} {
		if s, ok := claims[k].(string); ok && s != "" {
			p.ClientID = s
			break
		}
	}
	return p, nil
}

func (rs *ResourceServer) name(claims map[string]any, sub string) string {
	names := []string{"preferred_username", "email", "name"}
	if rs.opts.NameClaim != "" {
		names = []string{rs.opts.NameClaim}
	}
	for _, n := range names {
		if v, ok := lookupClaim(claims, n); ok {
			if s, ok := v.(string); ok && s != "" {
				return s
			}
		}
	}
	return sub
}

// audienceOK reports whether aud names this resource (RFC 8707).
func (rs *ResourceServer) audienceOK(aud []string, resource string) bool {
	accept := rs.audiences
	if len(accept) == 0 {
		accept = []string{resource, join(rs.root, rs.opts.EndpointPath), rs.root}
	}
	for _, a := range aud {
		for _, want := range accept {
			if a == want || sameResource(a, want) {
				return true
			}
		}
	}
	return false
}

// WriteError answers a refused request: status, WWW-Authenticate and a
// JSON body {"error", "error_description"} (RFC 6750 §3).
func (rs *ResourceServer) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	e := AsError(err)
	if e == nil {
		e = &Error{Status: 500, Description: "internal error", Err: err}
	}
	p := r.URL.Path
	if _, _, ok := rs.ResourceFor(p); !ok {
		p = rs.opts.EndpointPath
	}
	switch e.Status {
	case 401:
		w.Header().Set("WWW-Authenticate", rs.challenge(p, e))
	case 403:
		if e.Code == CodeInsufficientScope {
			w.Header().Set("WWW-Authenticate", rs.challenge(p, e))
		}
	case 503:
		w.Header().Set("Retry-After", "30")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(e.Status)
	code := e.Code
	if code == "" && e.Status == 401 {
		code = "unauthorized"
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": e.Description})
}
