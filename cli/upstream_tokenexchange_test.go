package cli_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bubbuild/bub-mcp/internal/oidctest"
)

// jwtClaims reads a JWT's claims without checking it (the test looks at
// what the upstream was sent).
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUpstreamTokenExchange: a gateway `bub-mcp serve --http`, its OAuth
// front before the real Hydra, mounts an upstream `bub-mcp serve --http`
// whose [auth.oauth] issuer is that front with auth = "token_exchange";
// both map the group claim (which the exchanged token keeps) to a profile.
// Alice and bob sign in at the gateway; each call of theirs reaches the
// upstream (through a proxy that records the Authorization headers) with
// a token the front issued for the upstream alone, naming them, never
// their gateway token, and the upstream audits each as themselves. A
// static-token caller gets a clear tool error.
func TestUpstreamTokenExchange(t *testing.T) {
	idp := oidctest.Start(t)
	gwAddr, upAddr := freeAddr(t), freeAddr(t)
	gateway := "http://" + gwAddr

	var mu sync.Mutex
	var bearers []string // Authorization headers of the upstream's /mcp requests
	target, _ := url.Parse("http://" + upAddr)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	proxy := httptest.NewServer(bufferedBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			mu.Lock()
			bearers = append(bearers, r.Header.Get("Authorization"))
			mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	})))
	t.Cleanup(proxy.Close)
	upMCP := proxy.URL + "/mcp"

	// The gateway.
	idpClient := idp.NewClient(t, oidctest.ClientOptions{
		RedirectURIs: []string{gateway + "/oauth/callback"},
		Scopes:       []string{"email", "profile"},
		Login:        &oidctest.TokenRequest{Subject: "nobody"},
	})
	const carolSecret = "carol-static-token-0123456789"
	sum := sha256.Sum256([]byte(carolSecret))
	gwHome := t.TempDir()
	gwSrc := fmt.Sprintf(`[server]
public_url = %q

[profiles.default]
workspace = %q

[[auth.tokens]]
name = "carol"
sha256 = %q
profile = "default"

[auth.oauth]
issuer = %q
required_scopes = ["mcp"]

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "default"

[auth.oauth.proxy]
client_id = %q
client_secret_env = "BUB_TEST_IDP_SECRET"
scopes = ["openid", "email", "profile"]
token_exchange_audiences = [%q]

[upstreams.up]
url = %q
auth = "token_exchange"
`, gateway, t.TempDir(), hex.EncodeToString(sum[:]), idp.Issuer, idpClient.ID, upMCP, upMCP)
	gwCfg := writeConfig(t, gwSrc)
	gw := exec.Command(binary(t), "serve", "--http", gwAddr)
	gw.Env = append(os.Environ(), "BUB_HOME="+gwHome, "BUB_CONFIG="+gwCfg, "BUB_TEST_IDP_SECRET="+idpClient.Secret)
	serveHTTP(t, gw)

	// The upstream trusts the gateway's front.
	ws := noteWorkspace(t, "from the upstream's workspace\n")
	upHome := t.TempDir()
	upSrc := fmt.Sprintf(`[server]
public_url = %q

[profiles.default]
workspace = %q
tools = ["fs.read"]

[auth.oauth]
issuer = %q

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "default"
`, proxy.URL, ws, gateway)
	upCfg := writeConfig(t, upSrc)
	up := exec.Command(binary(t), "serve", "--http", upAddr)
	up.Env = append(os.Environ(), "BUB_HOME="+upHome, "BUB_CONFIG="+upCfg)
	serveHTTP(t, up)

	// signIn connects an MCP client to the gateway as subject, through
	// the front and Hydra; it returns the client and its gateway token.
	signIn := func(subject string) (*client.Client, string) {
		t.Helper()
		idp.SetLogin(idpClient, oidctest.TokenRequest{Subject: subject, Claims: map[string]any{"groups": []string{"eng"}}})
		redirect := "http://127.0.0.1:9/callback"
		p := startSignIn(t, gateway+"/mcp", redirect, "token exchange test "+subject, mcp.ProtocolVersion20251125)
		p.finish(t, signInAndConsent(t, p.authURL, redirect, p.state, gateway, "token exchange test "+subject))
		c, store := p.c, p.store
		tok, err := store.GetToken(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return c, tok.AccessToken
	}
	alice, aliceToken := signIn("alice")
	// Nothing is remembered yet: alice's view lists the upstream's tools
	// with her exchanged token.
	waitTool(t, alice, "up_fs_read")
	bob, bobToken := signIn("bob")

	read := func(who string, c *client.Client) {
		t.Helper()
		res, err := callTool(t.Context(), c, "up_fs_read", map[string]any{"path": "note.txt"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if text := resultText(res); res.IsError || !strings.Contains(text, "from the upstream's workspace") {
			t.Fatalf("%s's call: %q", who, text)
		}
	}
	read("alice", alice)
	read("bob", bob)
	read("alice", alice) // from the cache of exchanged tokens

	// The upstream audits each call as its caller.
	want := map[string]bool{gateway + "#alice": false, gateway + "#bob": false}
	lastAudit(t, upHome, 3)
	upLog := waitFile(t, filepath.Join(upHome, "audit", "audit.jsonl"))
	for _, line := range strings.Split(strings.TrimSpace(upLog), "\n") {
		var rec struct {
			Principal, Tool string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Tool == "fs_read" {
			if _, ok := want[rec.Principal]; !ok {
				t.Errorf("the upstream audited fs_read by %q", rec.Principal)
			}
			want[rec.Principal] = true
		}
	}
	for p, seen := range want {
		if !seen {
			t.Errorf("the upstream audited no call by %s:\n%s", p, upLog)
		}
	}

	// What the upstream was sent: tokens for it alone, from the front,
	// naming alice or bob; never a gateway token.
	mu.Lock()
	sent := append([]string(nil), bearers...)
	mu.Unlock()
	subs := map[string]bool{}
	for _, h := range sent {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			t.Fatalf("the upstream got Authorization %q", h)
		}
		if tok == aliceToken || tok == bobToken {
			t.Fatalf("a caller's own gateway token reached the upstream")
		}
		c := jwtClaims(t, tok)
		if c["aud"] != upMCP || c["iss"] != gateway {
			t.Errorf("the upstream got a token with aud %v, iss %v; want %s from %s", c["aud"], c["iss"], upMCP, gateway)
		}
		subs[fmt.Sprint(c["sub"])] = true
	}
	if !subs["alice"] || !subs["bob"] || len(subs) != 2 {
		t.Errorf("subjects of the upstream's tokens: %v; want alice and bob", subs)
	}
	if g := jwtClaims(t, aliceToken); g["aud"] != gateway+"/mcp" {
		t.Errorf("alice's gateway token has aud %v", g["aud"])
	}

	// A static-token caller has no token to exchange.
	carol := connectStatic(t, gateway+"/mcp", carolSecret)
	res, err := callTool(t.Context(), carol, "up_fs_read", map[string]any{"path": "note.txt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if text := resultText(res); !res.IsError || !strings.Contains(text, `upstream up uses auth = "token_exchange": its calls act with the caller's own OAuth access token, and this caller has none`) {
		t.Errorf("static-token caller's call: %q; want the clear token-exchange error", text)
	}

	// Neither gateway token is in the gateway's audit log.
	if log := waitFile(t, filepath.Join(gwHome, "audit", "audit.jsonl")); strings.Contains(log, aliceToken) || strings.Contains(log, bobToken) {
		t.Errorf("the gateway's audit log holds a caller's token")
	}
}

// connectStatic connects an MCP client with a static bearer token.
func connectStatic(t *testing.T, endpoint, secret string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(endpoint, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + secret}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return c
}
