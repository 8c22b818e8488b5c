package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// OAuthProxy is [auth.oauth.proxy]: bub-mcp as the authorization server
// clients see (RFC 8414 metadata, registration, /authorize, /token), in
// front of [auth.oauth] issuer, the real IdP, where users sign in with
// one pre-registered client. The front's own tokens are what the resource
// server then accepts.
type OAuthProxy struct {
	// ClientID is bub-mcp's client at the IdP; its redirect URI there is
	// [server] public_url + "/oauth/callback".
	ClientID string `toml:"client_id"`
	// ClientSecretEnv names the variable holding the client's secret.
	ClientSecretEnv string `toml:"client_secret_env"`
	// ClientSecret is filled from ClientSecretEnv at load; not a key.
	ClientSecret string `toml:"-"`
	// Scopes asked of the IdP; default openid email profile.
	Scopes []string `toml:"scopes"`
	// Claims are the ID-token claims copied into bub-mcp's tokens (what
	// the rules and name_claim look at); default email, email_verified,
	// name, preferred_username, groups, roles.
	Claims []string `toml:"claims"`
	// AccessTokenTTL is the access tokens' lifetime (default 10m, at most
	// 1h: they cannot be revoked).
	AccessTokenTTL Duration `toml:"access_token_ttl"`
	// RefreshTokenTTL is the refresh tokens' lifetime (default 720h).
	RefreshTokenTTL Duration `toml:"refresh_token_ttl"`
	// KeyRotation is the signing key's age at which a new one takes over
	// (default 24h); old keys stay published as long, so no one is logged
	// out.
	KeyRotation Duration `toml:"key_rotation"`
	// MaxClients bounds dynamic client registrations (default 10000).
	MaxClients int `toml:"max_clients"`
	// Store keeps clients, grants, codes, refresh tokens and signing keys:
	// "file" ($BUB_HOME/oauth, one machine) or "postgres" (replicas).
	// Unset, it follows [store]: "postgres" in [store]'s database when
	// [store] kind = "postgres" (replicas then share the front without a
	// second setting), else "file".
	Store string `toml:"store"`
	// DSNEnv names the variable holding the connection string of a
	// database of the front's own, for store = "postgres"; without it the
	// front uses [store]'s.
	DSNEnv string `toml:"dsn_env"`
	// DSN is filled from DSNEnv at load; not a key.
	DSN string `toml:"-"`
	// TokenExchangeAudiences are the resources (MCP servers' URLs, as
	// their `[upstreams.<name>] url` names them) for which the front
	// trades one of its own access tokens for another, RFC 8693: an
	// upstream bub-mcp mounted with auth = "token_exchange" whose
	// [auth.oauth] issuer is this front. Empty: no token exchange.
	TokenExchangeAudiences []string `toml:"token_exchange_audiences"`
}

// checkProxy validates [auth.oauth.proxy] and reads its secrets from the
// environment.
func (c *Config) checkProxy(getenv func(string) string, fail func(string, ...string) error) error {
	p := c.Auth.OAuth.Proxy
	if p == nil {
		return nil
	}
	key := func(k string) []string { return []string{"auth", "oauth", "proxy", k} }
	if p.ClientID == "" {
		return fail("needs client_id: bub-mcp's client at the IdP", "auth", "oauth", "proxy")
	}
	if p.ClientSecretEnv == "" {
		return fail("needs client_secret_env: the variable holding the client's secret (never the secret itself)", "auth", "oauth", "proxy")
	}
	if p.ClientSecret = getenv(p.ClientSecretEnv); p.ClientSecret == "" {
		return fail(fmt.Sprintf("environment variable %s is empty or unset", p.ClientSecretEnv), key("client_secret_env")...)
	}
	if len(p.Scopes) > 0 && !slices.Contains(p.Scopes, "openid") {
		return fail(`must include "openid": the user's identity comes from the ID token`, key("scopes")...)
	}
	// 0 means the default; under a second the token answer's expires_in
	// (whole seconds) would be 0, an already expired token to clients.
	if d := p.AccessTokenTTL.Duration; d < 0 || (d > 0 && d < time.Second) || d > time.Hour {
		return fail("between 1s and 1h (access tokens cannot be revoked)", key("access_token_ttl")...)
	}
	if p.RefreshTokenTTL.Duration < 0 {
		return fail("must not be negative", key("refresh_token_ttl")...)
	}
	if d := p.KeyRotation.Duration; d < 0 || (d > 0 && d < time.Hour) {
		return fail("at least 1h", key("key_rotation")...)
	}
	if p.MaxClients < 0 {
		return fail("must not be negative", key("max_clients")...)
	}
	for _, a := range p.TokenExchangeAudiences {
		if u, err := url.Parse(a); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
			return fail(fmt.Sprintf("%q: want an MCP server's absolute http(s) URL", a), key("token_exchange_audiences")...)
		}
	}
	switch p.Store {
	case "", "file":
		if p.DSNEnv != "" {
			return fail(`only with store = "postgres"`, key("dsn_env")...)
		}
	case "postgres":
		// Without dsn_env the front takes [store]'s database, a module's
		// table: the server checks that one when it starts.
		if p.DSNEnv != "" {
			if p.DSN = strings.TrimSpace(getenv(p.DSNEnv)); p.DSN == "" {
				return fail(fmt.Sprintf("environment variable %s is empty or unset", p.DSNEnv), key("dsn_env")...)
			}
		}
	default:
		return fail(fmt.Sprintf(`unknown store %q: want "file" or "postgres"`, p.Store), key("store")...)
	}
	return nil
}
