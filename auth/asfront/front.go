// Package asfront is bub-mcp's authorization-server front ("OAuth proxy"):
// for an IdP that speaks neither Dynamic Client Registration nor Client ID
// Metadata Documents (Entra, Okta without DCR, Google, most company IdPs),
// bub-mcp is the OAuth 2.1 authorization server MCP clients see. It
// publishes RFC 8414 metadata, registers clients (RFC 7591, and CIMD
// client ids fetched from their https URL), runs /authorize (PKCE S256,
// RFC 8707 resource, RFC 9207 iss), /token (authorization code, refresh
// with rotation and reuse detection) and /revoke (RFC 7009), and sends the
// user to the real IdP with one pre-registered client. On the IdP's
// callback it reads the ID token's claims, asks the user to consent once
// per client, and issues its own short-lived JWT access tokens, signed by
// an auth.KeyRing and checked by the ordinary auth.ResourceServer, so the
// claims→profile rules apply unchanged.
//
// State (clients, pending requests, consents, codes, refresh tokens)
// lives in a Store: a file under $BUB_HOME for one machine, PostgreSQL
// (package sessions/pgstore/oauthstore) for replicas.
package asfront

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/auth"
)

// Paths the front serves, relative to its issuer.
const (
	MetadataPath     = "/.well-known/oauth-authorization-server"
	AuthorizePath    = "/authorize"
	TokenPath        = "/token"
	RevokePath       = "/revoke"
	RegisterPath     = "/register"
	JWKSPath         = "/jwks"
	CallbackPath     = "/oauth/callback"
	ConsentPath      = "/oauth/consent"
	consentCookie    = "bub_consent"
	maxFormBytes     = 64 << 10
	maxPendingRecord = 10000
)

// Defaults for Options' zero values.
const (
	DefaultAccessTokenTTL  = 10 * time.Minute
	DefaultRefreshTokenTTL = 30 * 24 * time.Hour
	DefaultCodeTTL         = time.Minute
	DefaultPendingTTL      = 10 * time.Minute
	DefaultKeyRotation     = 24 * time.Hour
	DefaultMaxClients      = 10000
)

// DefaultClaims are the IdP claims copied into access tokens when
// Options.Claims is empty: what names a person and what rules usually
// look at.
var DefaultClaims = []string{"email", "email_verified", "name", "preferred_username", "groups", "roles"}

// Upstream is the real IdP and the one client registered there for
// bub-mcp, whose redirect URI is the front's issuer + CallbackPath.
type Upstream struct {
	// Issuer is the IdP's issuer; its endpoints come from OIDC discovery.
	Issuer string
	// ClientID and ClientSecret are bub-mcp's client at the IdP.
	ClientID, ClientSecret string
	// Scopes asked of the IdP; empty means openid email profile.
	Scopes []string
}

// Options configure a Front; zero values mean the defaults named.
type Options struct {
	// Issuer is the front's issuer identifier: the server's public URL
	// (https://mcp.example.com), without a trailing slash. Required.
	Issuer string
	// Upstream is the IdP users sign in at. Required.
	Upstream Upstream
	// Keys sign the access tokens. Required.
	Keys *auth.KeyRing
	// Store keeps clients, grants, codes and refresh tokens. Required.
	Store Store
	// Resource reports whether a `resource` (RFC 8707) names this server
	// and returns it canonicalised; tokens are issued for it alone.
	// Required.
	Resource func(resource string) (canonical string, ok bool)
	// DefaultResource is the resource of a request that names none (the
	// MCP endpoint). Required.
	DefaultResource string
	// Scopes are the scopes clients may ask for (and get when they ask for
	// none), e.g. the resource server's required scopes.
	Scopes []string
	// Claims are the IdP ID-token claims copied into access tokens; empty
	// means DefaultClaims. The rules' claims belong here.
	Claims []string
	// AccessTokenTTL: 0 means 10 min.
	AccessTokenTTL time.Duration
	// RefreshTokenTTL: 0 means 30 days.
	RefreshTokenTTL time.Duration
	// CodeTTL: 0 means 1 min.
	CodeTTL time.Duration
	// KeyRotation is how old the signing key gets before a new one takes
	// over (the old one stays published, so nobody is logged out); 0
	// means 24 h.
	KeyRotation time.Duration
	// TokenExchangeAudiences are the resources the token-exchange grant
	// (RFC 8693) may issue tokens for, from the front's own access
	// tokens; empty means no token exchange.
	TokenExchangeAudiences []string
	// MaxClients bounds dynamic registrations; 0 means 10000.
	MaxClients int
	// AllowLoopbackClientIDs lets http://127.0.0.1 URLs be CIMD client ids
	// and their documents be fetched from loopback: for tests only.
	AllowLoopbackClientIDs bool
	// HTTPClient talks to the IdP; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
	// Logger logs refusals' causes; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Front is the authorization-server front. Safe for concurrent use.
type Front struct {
	opts     Options
	upstream *upstream
	cimd     *cimdCache

	rotateMu sync.Mutex
	reloaded time.Time // last key-ring reload
}

// New checks opts and returns a Front. It contacts nobody: the IdP's
// discovery document is fetched on the first sign-in.
func New(opts Options) (*Front, error) {
	if opts.Issuer == "" || strings.HasSuffix(opts.Issuer, "/") {
		return nil, fmt.Errorf("asfront: issuer %q: want the public URL without a trailing slash", opts.Issuer)
	}
	if opts.Upstream.Issuer == "" || opts.Upstream.ClientID == "" {
		return nil, errors.New("asfront: the upstream issuer and client_id are required")
	}
	if opts.Keys == nil || opts.Store == nil || opts.Resource == nil || opts.DefaultResource == "" {
		return nil, errors.New("asfront: Keys, Store, Resource and DefaultResource are required")
	}
	if opts.AccessTokenTTL <= 0 {
		opts.AccessTokenTTL = DefaultAccessTokenTTL
	}
	if opts.RefreshTokenTTL <= 0 {
		opts.RefreshTokenTTL = DefaultRefreshTokenTTL
	}
	if opts.CodeTTL <= 0 {
		opts.CodeTTL = DefaultCodeTTL
	}
	if opts.KeyRotation <= 0 {
		opts.KeyRotation = DefaultKeyRotation
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = DefaultMaxClients
	}
	if len(opts.Claims) == 0 {
		opts.Claims = DefaultClaims
	}
	if len(opts.Upstream.Scopes) == 0 {
		opts.Upstream.Scopes = []string{"openid", "email", "profile"}
	}
	if !slices.Contains(opts.Upstream.Scopes, "openid") {
		opts.Upstream.Scopes = append([]string{"openid"}, opts.Upstream.Scopes...)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Scopes = slices.Clone(opts.Scopes)
	opts.Claims = slices.Clone(opts.Claims)
	opts.TokenExchangeAudiences = slices.Clone(opts.TokenExchangeAudiences)
	f := &Front{opts: opts}
	f.upstream = &upstream{opts: opts.Upstream, client: opts.HTTPClient, now: opts.Now}
	f.cimd = newCIMDCache(opts.AllowLoopbackClientIDs, opts.Now)
	return f, nil
}

// JWKSURL returns the URL of the front's key set.
func (f *Front) JWKSURL() string { return f.opts.Issuer + JWKSPath }

// Handler serves the front's endpoints at their paths (MetadataPath,
// AuthorizePath, …); other paths get 404. Mount it so those paths reach
// it, beside the MCP endpoints.
func (f *Front) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+MetadataPath, f.serveMetadata)
	mux.Handle("GET "+JWKSPath, f.opts.Keys.JWKSHandler())
	mux.HandleFunc("POST "+RegisterPath, f.serveRegister)
	mux.HandleFunc("GET "+AuthorizePath, f.serveAuthorize)
	mux.HandleFunc("GET "+CallbackPath, f.serveCallback)
	mux.HandleFunc("POST "+ConsentPath, f.serveConsent)
	mux.HandleFunc("POST "+TokenPath, f.serveToken)
	mux.HandleFunc("POST "+RevokePath, f.serveRevoke)
	// Browser-based clients (the MCP Inspector) read the metadata,
	// register, redeem codes and revoke cross-origin; none of it uses
	// cookies.
	for _, p := range []string{MetadataPath, RegisterPath, TokenPath, RevokePath} {
		mux.HandleFunc("OPTIONS "+p, preflight)
	}
	return mux
}

// Paths lists the paths Handler serves, for mounting.
func Paths() []string {
	return []string{MetadataPath, JWKSPath, RegisterPath, AuthorizePath, CallbackPath, ConsentPath, TokenPath, RevokePath}
}

// KeysClient returns an HTTP client that answers GETs of the front's
// JWKSURL from memory, for auth.Options.HTTPClient: the resource server
// then checks the front's tokens without a round trip through the public
// URL (which behind a proxy may not be reachable from inside).
func (f *Front) KeysClient() *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet || r.URL.String() != f.JWKSURL() {
			return nil, fmt.Errorf("asfront: the key client serves %s only", f.JWKSURL())
		}
		// Another process sharing the key store may have rotated.
		if err := f.opts.Keys.Reload(r.Context()); err != nil {
			f.opts.Logger.Warn("oauth.proxy.key_reload", "error", err)
		}
		blob, err := json.Marshal(f.opts.Keys.JWKS())
		if err != nil {
			return nil, err
		}
		return &http.Response{
			StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {"application/json"}},
			Body:          io.NopCloser(bytes.NewReader(blob)),
			ContentLength: int64(len(blob)), Request: r,
		}, nil
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (fn roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return fn(r) }

// metadata is the RFC 8414 document.
func (f *Front) metadata() map[string]any {
	scopes := f.opts.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	grants := []string{"authorization_code", "refresh_token"}
	if len(f.opts.TokenExchangeAudiences) > 0 {
		grants = append(grants, GrantTokenExchange)
	}
	return map[string]any{
		"issuer":                                         f.opts.Issuer,
		"authorization_endpoint":                         f.opts.Issuer + AuthorizePath,
		"token_endpoint":                                 f.opts.Issuer + TokenPath,
		"registration_endpoint":                          f.opts.Issuer + RegisterPath,
		"jwks_uri":                                       f.JWKSURL(),
		"scopes_supported":                               scopes,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          grants,
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint":                            f.opts.Issuer + RevokePath,
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          true,
	}
}

func preflight(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
	w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Mcp-Protocol-Version")
	w.Header().Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

func (f *Front) serveMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, f.metadata())
}

// session is what the front learned of a signed-in user: the IdP's
// subject and the claims copied into tokens.
type session struct {
	Subject string         `json:"sub"`
	Claims  map[string]any `json:"claims,omitempty"`
}

// grantData is a code's and a refresh token's payload: who, for which
// client, resource and scopes.
type grantData struct {
	ClientID    string   `json:"client_id"`
	RedirectURI string   `json:"redirect_uri,omitempty"`
	Challenge   string   `json:"code_challenge,omitempty"`
	Resource    string   `json:"resource"`
	Scopes      []string `json:"scopes"`
	Session     session  `json:"session"`
}

// accessToken signs an access token for g.
func (f *Front) accessToken(ctx context.Context, g grantData) (string, error) {
	now := f.opts.Now()
	claims := map[string]any{}
	maps.Copy(claims, g.Session.Claims)
	// Registered claims last: the IdP's copies cannot override them.
	maps.Copy(claims, map[string]any{
		"iss":       f.opts.Issuer,
		"sub":       g.Session.Subject,
		"aud":       g.Resource,
		"client_id": g.ClientID,
		"scope":     strings.Join(g.Scopes, " "),
		"iat":       now.Unix(),
		"nbf":       now.Unix(),
		"exp":       now.Add(f.opts.AccessTokenTTL).Unix(),
		"jti":       random(16),
	})
	return f.sign(ctx, claims)
}

// sign signs claims with the current key, rotated first if it is due; a
// failed rotation is logged and the current key signs.
func (f *Front) sign(ctx context.Context, claims map[string]any) (string, error) {
	if err := f.maybeRotate(ctx); err != nil {
		f.opts.Logger.Warn("oauth.proxy.key_rotation", "error", err)
	}
	return f.opts.Keys.Sign(claims)
}

// maybeRotate makes a new signing key when the current one is older than
// KeyRotation. Tokens it signed stay valid: the ring keeps it published.
func (f *Front) maybeRotate(ctx context.Context) error {
	f.rotateMu.Lock()
	defer f.rotateMu.Unlock()
	// Pick up a rotation by another process now and then, so this one
	// signs with the newest key too.
	if now := f.opts.Now(); now.Sub(f.reloaded) >= time.Minute {
		f.reloaded = now
		if err := f.opts.Keys.Reload(ctx); err != nil {
			return err
		}
	}
	if f.opts.Now().Sub(f.opts.Keys.SigningKeyCreated()) < f.opts.KeyRotation {
		return nil
	}
	return f.opts.Keys.Rotate(ctx)
}

// random returns n random bytes, URL-safe base64.
func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hash is the key a secret is stored under.
func hash(secret string) string {
	s := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(s[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError is an RFC 6749 §5.2 error body.
type oauthError struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	cause       error
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func oerr(status int, code, desc string, cause error) *oauthError {
	return &oauthError{Status: status, Code: code, Description: desc, cause: cause}
}

// refuse answers e as JSON and logs its cause.
func (f *Front) refuse(w http.ResponseWriter, r *http.Request, e *oauthError) {
	f.opts.Logger.Info("oauth.proxy.refused", "path", r.URL.Path, "error", e.Code, "reason", e.Description, "cause", e.cause)
	writeJSON(w, e.Status, e)
}

// readForm parses a bounded urlencoded body.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, *oauthError) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, oerr(400, "invalid_request", "request body too large or unreadable", err)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return nil, oerr(400, "invalid_request", "want application/x-www-form-urlencoded", nil)
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, oerr(400, "invalid_request", "malformed form", err)
	}
	for k, vs := range v {
		if len(vs) > 1 {
			return nil, oerr(400, "invalid_request", "parameter "+k+" repeated", nil)
		}
	}
	return v, nil
}
