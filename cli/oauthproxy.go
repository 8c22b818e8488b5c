package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/asfront"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/sessions/pgstore/oauthstore"
)

// oauthFront builds the authorization-server front of [auth.oauth.proxy]
// and the resource server that accepts its tokens; front is nil without
// the table (then rs is [auth.oauth]'s plain resource server). storeDSN
// is [store]'s database, "" for the file store: the front's default.
// release releases the front's store.
func oauthFront(ctx context.Context, cfg *config.Config, home, storeDSN string, log *slog.Logger) (front *asfront.Front, rs *auth.ResourceServer, release func(), err error) {
	release = func() {}
	o := cfg.Auth.OAuth
	if o == nil || o.Proxy == nil {
		rs, err = oauthServer(cfg, nil, nil)
		return nil, rs, release, err
	}
	p := o.Proxy
	issuer, err := proxyIssuer(cfg)
	if err != nil {
		return nil, nil, release, err
	}
	var store asfront.Store
	var keyStore auth.KeyStore
	kind, dsn := p.Store, p.DSN
	if kind == "" && storeDSN != "" {
		kind = "postgres"
	}
	if kind == "postgres" && dsn == "" {
		dsn = storeDSN
	}
	switch kind {
	case "postgres":
		if dsn == "" {
			return nil, nil, release, errors.New(`[auth.oauth.proxy] store = "postgres" needs a database: [store] kind = "postgres" (the front then shares it) or dsn_env`)
		}
		s, err := oauthstore.Open(dsn)
		if err != nil {
			return nil, nil, release, fmt.Errorf("[auth.oauth.proxy]: %w", err)
		}
		release = s.Close
		store, keyStore = s, s.Keys()
	default:
		dir := filepath.Join(home, "oauth")
		store = asfront.NewFileStore(filepath.Join(dir, "store.json"), nil)
		keyStore = auth.FileKeyStore{Path: filepath.Join(dir, "keyring.json")}
	}
	accessTTL := p.AccessTokenTTL.Duration
	if accessTTL == 0 {
		accessTTL = asfront.DefaultAccessTokenTTL
	}
	rotation := p.KeyRotation.Duration
	if rotation == 0 {
		rotation = asfront.DefaultKeyRotation
	}
	// A retired key stays published for a rotation period and at least an
	// access token's lifetime, so no token outlives its key.
	keys, err := auth.NewKeyRing(ctx, auth.KeyRingOptions{Store: keyStore, Retain: max(rotation, accessTTL+time.Minute)})
	if err != nil {
		release()
		return nil, nil, func() {}, fmt.Errorf("[auth.oauth.proxy]: %w", err)
	}
	claims := slices.Clone(p.Claims)
	if len(claims) == 0 {
		claims = slices.Clone(asfront.DefaultClaims)
	}
	// The rules and name_claim look at claims the front must copy.
	for _, r := range o.Rules {
		if top, _, _ := strings.Cut(r.Claim, "."); top != "scope" && !slices.Contains(claims, top) {
			claims = append(claims, top)
		}
	}
	if o.NameClaim != "" && !slices.Contains(claims, o.NameClaim) {
		claims = append(claims, o.NameClaim)
	}
	var resources *auth.ResourceServer // set below; the front asks it which resources are ours
	front, err = asfront.New(asfront.Options{
		Issuer:          issuer,
		Upstream:        asfront.Upstream{Issuer: o.Issuer, ClientID: p.ClientID, ClientSecret: p.ClientSecret, Scopes: p.Scopes},
		Keys:            keys,
		Store:           store,
		Resource:        func(r string) (string, bool) { return ownResource(resources, issuer, r) },
		DefaultResource: issuer + auth.DefaultEndpointPath,
		Scopes:          o.RequiredScopes,
		Claims:          claims,
		AccessTokenTTL:  accessTTL,
		RefreshTokenTTL: p.RefreshTokenTTL.Duration,
		KeyRotation:     rotation,
		MaxClients:      p.MaxClients,
		Logger:          log,
		// Upstreams mounted with auth = "token_exchange" trade the
		// callers' tokens here (same trust domain).
		TokenExchangeAudiences: p.TokenExchangeAudiences,
	})
	if err != nil {
		release()
		return nil, nil, func() {}, fmt.Errorf("[auth.oauth.proxy]: %w", err)
	}
	rs, err = oauthServer(cfg, front, nil)
	if err != nil {
		release()
		return nil, nil, func() {}, err
	}
	resources = rs
	return front, rs, release, nil
}

// proxyIssuer is the front's issuer: the canonical public_url without a
// trailing slash.
func proxyIssuer(cfg *config.Config) (string, error) {
	public, err := auth.CanonicalURL("public_url", cfg.Server.PublicURL)
	if err != nil {
		return "", fmt.Errorf("[server] public_url: %w", err)
	}
	return strings.TrimRight(public, "/"), nil
}

// ownResource canonicalises r and reports whether it is one of this
// server's resources (the endpoint, a profile's, the root); public is the
// server's canonical public URL (a trailing slash or none).
func ownResource(rs *auth.ResourceServer, public, r string) (string, bool) {
	c, err := auth.CanonicalURL("resource", r)
	if err != nil {
		return "", false
	}
	u, err1 := url.Parse(c)
	pu, err2 := url.Parse(public)
	if err1 != nil || err2 != nil || u.Scheme != pu.Scheme || u.Host != pu.Host {
		return "", false
	}
	base := strings.TrimRight(pu.Path, "/")
	rest, ok := strings.CutPrefix(u.Path, base)
	if !ok {
		return "", false
	}
	if rest == "" {
		rest = "/"
	}
	res, _, ok := rs.ResourceFor(rest)
	return res, ok && res == c
}

// frontRoutes are the OAuth front's endpoints, by path, for the HTTP
// transport to answer beside /mcp; none without a front.
func frontRoutes(front *asfront.Front) map[string]http.Handler {
	if front == nil {
		return nil
	}
	h := front.Handler()
	routes := map[string]http.Handler{}
	for _, p := range asfront.Paths() {
		routes[p] = h
	}
	return routes
}
