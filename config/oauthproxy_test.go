package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOAuthProxyConfig(t *testing.T) {
	base := oauthSrc("https://idp.example.com", "https://mcp.example.com", "default") + "[auth.oauth.proxy]\n"
	env := map[string]string{"IDP_SECRET": "s3", "OAUTH_DSN": "postgres://x\n"} // a trailing newline (from a file) is trimmed, as [store] dsn_env does
	getenv := func(k string) string { return env[k] }
	c, err := Parse("bub.toml", base+`client_id = "bub"
client_secret_env = "IDP_SECRET"
scopes = ["openid", "email", "groups"]
claims = ["email", "groups"]
access_token_ttl = "5m"
key_rotation = "12h"
store = "postgres"
dsn_env = "OAUTH_DSN"
token_exchange_audiences = ["https://up.example/mcp"]
`, getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := &OAuthProxy{ClientID: "bub", ClientSecretEnv: "IDP_SECRET", ClientSecret: "s3", Scopes: []string{"openid", "email", "groups"},
		Claims: []string{"email", "groups"}, AccessTokenTTL: Duration{5 * time.Minute}, KeyRotation: Duration{12 * time.Hour},
		Store: "postgres", DSNEnv: "OAUTH_DSN", DSN: "postgres://x", TokenExchangeAudiences: []string{"https://up.example/mcp"}}
	if diff := cmp.Diff(want, c.Auth.OAuth.Proxy); diff != "" {
		t.Errorf("[auth.oauth.proxy] (-want +got):\n%s", diff)
	}

	for _, tc := range []struct{ name, src, want string }{
		{"no client", "", "config: bub.toml:9: auth.oauth.proxy: needs client_id"},
		{"secret in no variable", "client_id = \"bub\"\n", "config: bub.toml:9: auth.oauth.proxy: needs client_secret_env"},
		{"secret variable unset", "client_id = \"bub\"\nclient_secret_env = \"NOPE\"\n", "config: bub.toml:11: auth.oauth.proxy.client_secret_env: environment variable NOPE is empty or unset"},
		{"scopes without openid", "client_id = \"bub\"\nclient_secret_env = \"IDP_SECRET\"\nscopes = [\"email\"]\n", "config: bub.toml:12: auth.oauth.proxy.scopes: must include \"openid\""},
		{"long access tokens", "client_id = \"bub\"\nclient_secret_env = \"IDP_SECRET\"\naccess_token_ttl = \"2h\"\n", "config: bub.toml:12: auth.oauth.proxy.access_token_ttl: between 1s and 1h"},
		{"sub-second access tokens", "client_id = \"bub\"\nclient_secret_env = \"IDP_SECRET\"\naccess_token_ttl = \"500ms\"\n", "config: bub.toml:12: auth.oauth.proxy.access_token_ttl: between 1s and 1h"},
		{"fast rotation", "client_id = \"bub\"\nclient_secret_env = \"IDP_SECRET\"\nkey_rotation = \"1m\"\n", "config: bub.toml:12: auth.oauth.proxy.key_rotation: at least 1h"},
		{"unknown store", "client_id = \"bub\"\nclient_secret_env = \"IDP_SECRET\"\nstore = \"redis\"\n", "config: bub.toml:12: auth.oauth.proxy.store: unknown store \"redis\""},
		{"relative audience", "client_id = \"bub\"\nclient_secret_env = \"IDP_SECRET\"\ntoken_exchange_audiences = [\"/mcp\"]\n", "config: bub.toml:12: auth.oauth.proxy.token_exchange_audiences: \"/mcp\": want an MCP server's absolute http(s) URL"},
		{"postgres without dsn", "client_id = \"bub\"\nclient_secret_env = \"IDP_SECRET\"\nstore = \"postgres\"\n", "config: bub.toml:9: auth.oauth.proxy.dsn_env: store = \"postgres\" needs dsn_env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bub.toml", base+tc.src, getenv)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Parse() error = %v; want prefix %q", err, tc.want)
			}
		})
	}
}
