package cli_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bubbuild/bub-mcp/internal/oidctest"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
)

// oauthUpstream is a second `bub-mcp serve --http` protected by OAuth, with
// its authorization-server front before the real Hydra, reached through a
// proxy in the test that records what bub-mcp sends it.
type oauthUpstream struct {
	idp    *oidctest.Provider
	client oidctest.Client // the front's client at Hydra
	public string          // the proxy's URL: the upstream's public_url
	home   string
	rec    *recorder
}

// recorder is a reverse proxy that remembers the Authorization headers of
// the MCP requests, the grant types of the token requests and the forms
// of the revocation requests it passes.
type recorder struct {
	mu      sync.Mutex
	bearer  []string     // Authorization headers of /mcp requests
	grants  []string     // grant_type of /token requests
	revokes []url.Values // forms of /revoke requests
}

func (r *recorder) revocations() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]url.Values(nil), r.revokes...)
}

func (r *recorder) seen() (bearer, grants []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bearer...), append([]string(nil), r.grants...)
}

// startOAuthUpstream serves the upstream: users sign in at Hydra as the
// subject the test sets with idp.SetLogin; access tokens live ttl.
func startOAuthUpstream(t *testing.T, ttl string) *oauthUpstream {
	t.Helper()
	up := &oauthUpstream{idp: oidctest.Start(t), home: t.TempDir(), rec: &recorder{}}
	addr := freeAddr(t)
	target, _ := url.Parse("http://" + addr)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	proxy := httptest.NewServer(bufferedBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.rec.mu.Lock()
		switch r.URL.Path {
		case "/mcp":
			up.rec.bearer = append(up.rec.bearer, r.Header.Get("Authorization"))
		case "/token":
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			form, _ := url.ParseQuery(string(body))
			up.rec.grants = append(up.rec.grants, form.Get("grant_type"))
		case "/revoke":
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			form, _ := url.ParseQuery(string(body))
			up.rec.revokes = append(up.rec.revokes, form)
		}
		up.rec.mu.Unlock()
		rp.ServeHTTP(w, r)
	})))
	t.Cleanup(proxy.Close)
	up.public = proxy.URL
	up.client = up.idp.NewClient(t, oidctest.ClientOptions{
		RedirectURIs: []string{up.public + "/oauth/callback"},
		Scopes:       []string{"email"},
		Login:        &oidctest.TokenRequest{Subject: "nobody"},
	})
	ws := noteWorkspace(t, "from the upstream's workspace\n")
	src := fmt.Sprintf(`[server]
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

[auth.oauth.proxy]
client_id = %q
client_secret_env = "BUB_TEST_IDP_SECRET"
scopes = ["openid", "email"]
access_token_ttl = %q
`, up.public, ws, up.idp.Issuer, up.client.ID, ttl)
	cfg := writeConfig(t, src)
	cmd := exec.Command(binary(t), "serve", "--http", addr)
	cmd.Env = append(os.Environ(), "BUB_HOME="+up.home, "BUB_CONFIG="+cfg, "BUB_TEST_IDP_SECRET="+up.client.Secret)
	serveHTTP(t, cmd)
	return up
}

// signInAs makes the next sign-in at Hydra one of subject (in group eng).
func (up *oauthUpstream) signInAs(subject string) {
	up.idp.SetLogin(up.client, oidctest.TokenRequest{Subject: subject, Claims: map[string]any{"groups": []string{"eng"}}})
}

// browse is the user's browser: it opens link, follows the redirects
// through the front, Hydra's sign-in and back to the front's consent page,
// allows, and follows the redirect to wherever the client asked to come
// back; it returns the last page.
func (up *oauthUpstream) browse(t *testing.T, link string) (int, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := b.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	form := url.Values{"decision": {"approve"}}
	for _, m := range consentField.FindAllStringSubmatch(string(page), -1) {
		form.Set(m[1], m[2])
	}
	if res.StatusCode != 200 || form.Get("csrf") == "" {
		t.Fatalf("no consent page at the upstream's front: %d %s", res.StatusCode, page)
	}
	res, err = b.PostForm(up.public+"/oauth/consent", form)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(page)
}

var loginLinkRE = regexp.MustCompile(`(http://\S+/upstreams/up/login\?state=[A-Za-z0-9_-]+)`)

// TestUpstreamOAuthPerPrincipal: a bub-mcp with two static tokens (alice
// and bob) mounts an upstream bub-mcp that needs OAuth (its front before
// the real Hydra) with auth = "oauth". The operator signs in first with
// `bub-mcp login` (the test is the browser on the loopback redirect),
// which lists the tools. Alice's first call gets a login link; after she
// follows it (signing in at Hydra as alice-up) her calls work and the
// upstream audits alice-up; bob still gets a link of his own, and after
// signing in as bob-up the upstream audits bob-up for his calls. Tokens
// are refreshed when they run out; `upstreams logout` makes alice sign in
// again; no client's own token reaches the upstream, and the credentials
// files hold no token in plaintext.
//
// With [store] kind = "postgres", the login, the server and the logout
// each have a $BUB_HOME of their own and share the sealed sets through the
// database (and the key through [server] state_key); the server finds the
// tool list by connecting as the operator.
func TestUpstreamOAuthPerPrincipal(t *testing.T) {
	for _, store := range []string{"file", "postgres"} {
		t.Run(store, func(t *testing.T) { testUpstreamOAuth(t, store) })
	}
}

func testUpstreamOAuth(t *testing.T, store string) {
	up := startOAuthUpstream(t, "2s")
	home := t.TempDir()
	var dsn string
	prelude := ""
	if store == "postgres" {
		dsn = pgtest.DSN(t)
		prelude = "[store]\nkind = \"postgres\"\ndsn_env = \"BUB_TEST_DSN\"\n\n[server]\nstate_key = \"a-state-key-the-replicas-share-0123456789\"\n\n"
	}
	secrets := map[string]string{"alice": "alice-static-token-0123456789", "bob": "bob-static-token-0123456789", "carol": "carol-static-token-0123456789"}
	var tokens strings.Builder
	for _, name := range []string{"alice", "bob", "carol"} {
		sum := sha256.Sum256([]byte(secrets[name]))
		fmt.Fprintf(&tokens, "[[auth.tokens]]\nname = %q\nsha256 = %q\nprofile = \"default\"\n\n", name, hex.EncodeToString(sum[:]))
	}
	src := fmt.Sprintf("%s[profiles.default]\nworkspace = %q\n\n%s[upstreams.up]\nurl = %q\nauth = \"oauth\"\nclient_name = \"bub-mcp gateway test\"\n",
		prelude, t.TempDir(), tokens.String(), up.public+"/mcp")
	cfg := writeConfig(t, src)
	// envFor is a process's environment: with the database, a $BUB_HOME
	// of its own.
	envFor := func() []string {
		h := home
		if store == "postgres" {
			h = t.TempDir()
		}
		return append(os.Environ(), "BUB_HOME="+h, "BUB_CONFIG="+cfg, "BUB_TEST_DSN="+dsn)
	}

	// The operator: `bub-mcp login up` prints the URL; the test's browser
	// signs in and comes back to the loopback redirect.
	up.signInAs("operator-up")
	authURL, loggedIn := startLogin(t, envFor(), up.public)
	if !strings.Contains(authURL, "redirect_uri="+url.QueryEscape("http://127.0.0.1:")) {
		t.Errorf("authorization URL %s: want a loopback redirect", authURL)
	}
	if code, page := up.browse(t, authURL); code != 200 || !strings.Contains(page, "Signed in") {
		t.Fatalf("loopback redirect: %d %s", code, page)
	}
	loggedIn()

	cmd := exec.Command(binary(t), "serve", "--http", "127.0.0.1:0")
	cmd.Env = envFor()
	endpoint := serveHTTP(t, cmd)
	connect := func(name string, opts ...client.ClientOption) *client.Client {
		t.Helper()
		tr, err := transport.NewStreamableHTTP(endpoint, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + secrets[name]}))
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, opts...)
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
		if len(opts) > 0 {
			init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{URL: &struct{}{}}
		}
		if _, err := c.Initialize(t.Context(), init); err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, bob := connect("alice"), connect("bob")
	if store == "postgres" {
		// Nothing is remembered in this $BUB_HOME: the server lists the
		// tools as the operator, whose set is in the database.
		waitTool(t, alice, "up_fs_read")
	}
	read := func(c *client.Client) (string, bool) {
		t.Helper()
		res, err := callTool(t.Context(), c, "up_fs_read", map[string]any{"path": "note.txt"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resultText(res), !res.IsError
	}
	linkFor := func(who string, c *client.Client) string {
		t.Helper()
		text, ok := read(c)
		m := loginLinkRE.FindStringSubmatch(text)
		if ok || m == nil {
			t.Fatalf("%s's call without an upstream token: %q; want a tool error with a login link", who, text)
		}
		return m[1]
	}
	// The upstream writes its audit record as the call ends, maybe after
	// the answer: wait for it.
	auditHas := func(subject string) bool {
		want := `"principal":"` + up.public + `#` + subject + `"`
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if b, _ := os.ReadFile(filepath.Join(up.home, "audit", "audit.jsonl")); strings.Contains(string(b), want) {
				return true
			}
		}
		return false
	}

	aliceLink := linkFor("alice", alice)
	up.signInAs("alice-up")
	if code, page := up.browse(t, aliceLink); code != 200 || !strings.Contains(page, "Signed in") {
		t.Fatalf("alice's sign-in: %d %s", code, page)
	}
	if text, ok := read(alice); !ok || !strings.Contains(text, "from the upstream's workspace") {
		t.Fatalf("alice's call after signing in: %q", text)
	}
	if !auditHas("alice-up") {
		t.Errorf("the upstream's audit log has no call of alice-up")
	}
	// A link is good once.
	jar, _ := cookiejar.New(nil)
	res, err := (&http.Client{Jar: jar}).Get(aliceLink)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(page), "already used") {
		t.Errorf("alice's link again: %d %s; want 400, already used", res.StatusCode, page)
	}

	// Bob never gets alice's token: his call asks him to sign in.
	bobLink := linkFor("bob", bob)
	if bobLink == aliceLink {
		t.Fatal("bob got alice's link")
	}
	up.signInAs("bob-up")
	if code, page := up.browse(t, bobLink); code != 200 || !strings.Contains(page, "Signed in") {
		t.Fatalf("bob's sign-in: %d %s", code, page)
	}
	if text, ok := read(bob); !ok || !strings.Contains(text, "from the upstream's workspace") {
		t.Fatalf("bob's call after signing in: %q", text)
	}
	if !auditHas("bob-up") {
		t.Errorf("the upstream's audit log has no call of bob-up")
	}
	// Alice's calls still go as alice-up, now that bob has a token too
	// (the upstream has audited her call and bob's: this is the third).
	if text, ok := read(alice); !ok {
		t.Fatalf("alice's call after bob signed in: %q", text)
	}
	if last := lastAudit(t, up.home, 3); strings.Count(last, "#alice-up") != 1 || strings.Contains(last, "#bob-up\"") {
		t.Errorf("the upstream's last record is not alice-up's call: %s", last)
	}

	// The access tokens run out (access_token_ttl = 2s): the next call
	// refreshes.
	time.Sleep(3 * time.Second)
	if text, ok := read(alice); !ok {
		t.Fatalf("alice's call after her access token expired: %q", text)
	}
	bearers, grants := up.rec.seen()
	if !strings.Contains(strings.Join(grants, " "), "refresh_token") {
		t.Errorf("no refresh at the upstream's token endpoint: grants %v", grants)
	}

	// No client's own token went upstream; the tokens that did are not
	// stored in plaintext.
	stored := storedCredentials(t, store, home, dsn)
	if len(stored) != 3 {
		t.Errorf("%d stored sets; want the local user's, alice's and bob's", len(stored))
	}
	for _, h := range bearers {
		for _, s := range secrets {
			if strings.Contains(h, s) {
				t.Errorf("a client's own token reached the upstream: %q", h)
			}
		}
		tok := strings.TrimPrefix(h, "Bearer ")
		if tok == "" {
			continue
		}
		for where, b := range stored {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s holds an upstream token in plaintext", where)
			}
		}
	}

	// Logout: alice's next call asks again; bob's still works. The
	// upstream's authorization server revoked her grant: the refresh
	// token bub-mcp held for her no longer refreshes there.
	logout := exec.Command(binary(t), "upstreams", "logout", "up", "--principal", "alice")
	logout.Env = envFor()
	b, err := logout.CombinedOutput()
	if err != nil || !strings.Contains(string(b), `deleted the tokens of "alice"`) || !strings.Contains(string(b), `revoked at the authorization server: "alice"`) {
		t.Fatalf("upstreams logout: %v %s", err, b)
	}
	var revoked url.Values
	for _, f := range up.rec.revocations() {
		if f.Get("token_type_hint") == "refresh_token" {
			if revoked != nil {
				t.Errorf("more than one refresh token revoked for one principal's logout")
			}
			revoked = f
		}
	}
	if revoked == nil || revoked.Get("token") == "" || revoked.Get("client_id") == "" {
		t.Fatalf("the logout revoked no refresh token at the upstream: %v", up.rec.revocations())
	}
	for _, st := range stored {
		if bytes.Contains(b, []byte(revoked.Get("token"))) || bytes.Contains(st, []byte(revoked.Get("token"))) {
			t.Errorf("the logout's output or a stored set shows the refresh token")
		}
	}
	res, err = http.PostForm(up.public+"/token", url.Values{"grant_type": {"refresh_token"},
		"refresh_token": {revoked.Get("token")}, "client_id": {revoked.Get("client_id")}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(page), `"error":"invalid_grant","error_description":"refresh token revoked"`) {
		t.Errorf("refresh with alice's revoked token at the upstream: %d %s; want invalid_grant, revoked", res.StatusCode, page)
	}
	linkFor("alice after logout", alice)
	if store == "file" {
		// Sign-ins and logouts are audited, naming who, never a token.
		log := waitFile(t, filepath.Join(home, "audit", "audit.jsonl"))
		for _, want := range []string{`"principal":"alice","profile":"","transport":"upstream","mode":"credentials","tool":"upstream.login","args":{"principal":"alice","upstream":"up"}`,
			`"tool":"upstream.logout","args":{"principal":"alice","upstream":"up"}`} {
			if !strings.Contains(log, want) {
				t.Errorf("bub-mcp's audit log has no %s:\n%s", want, log)
			}
		}
		for _, h := range bearers {
			if tok := strings.TrimPrefix(h, "Bearer "); tok != "" && strings.Contains(log, tok) {
				t.Error("bub-mcp's audit log holds an upstream token")
			}
		}
		if strings.Contains(log, "/login?state=") {
			t.Error("bub-mcp's audit log holds a login link")
		}
	}
	if text, ok := read(bob); !ok {
		t.Errorf("bob's call after alice's logout: %q", text)
	}

	// Carol's client takes URL-mode elicitation: her first call sends
	// her to the login link, waits while she signs in, and then works.
	links := make(chan string, 1)
	carol := connect("carol", client.WithElicitationHandler(urlOpener{links}))
	up.signInAs("carol-up")
	type result struct {
		text string
		ok   bool
	}
	done := make(chan result, 1)
	go func() {
		res, err := callTool(t.Context(), carol, "up_fs_read", map[string]any{"path": "note.txt"}, nil)
		if err != nil {
			done <- result{err.Error(), false}
			return
		}
		done <- result{resultText(res), !res.IsError}
	}()
	select {
	case link := <-links:
		if !loginLinkRE.MatchString(link) {
			t.Fatalf("URL-mode elicitation of %q; want a login link", link)
		}
		if code, page := up.browse(t, link); code != 200 || !strings.Contains(page, "Signed in") {
			t.Fatalf("carol's sign-in: %d %s", code, page)
		}
	case r := <-done:
		t.Fatalf("carol's call ended without a URL-mode elicitation: %+v", r)
	}
	if r := <-done; !r.ok || !strings.Contains(r.text, "from the upstream's workspace") {
		t.Errorf("carol's call, after she signed in while it waited: %+v", r)
	}
	if !auditHas("carol-up") {
		t.Errorf("the upstream's audit log has no call of carol-up")
	}
}

// urlOpener is a client that takes URL-mode elicitations: it hands the
// URL to the test (the user's browser) and accepts.
type urlOpener struct{ links chan<- string }

func (o urlOpener) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if req.Params.Mode != mcp.ElicitationModeURL {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	o.links <- req.Params.URL
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// lastAudit waits until the audit log under home has n records and
// returns the last.
func lastAudit(t *testing.T, home string, n int) string {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(home, "audit", "audit.jsonl"))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) >= n {
			return lines[len(lines)-1]
		}
	}
	t.Fatalf("the audit log under %s never had %d records", home, n)
	return ""
}

// storedCredentials is what the credentials store holds, by where: the
// files under home, or the rows of the database.
func storedCredentials(t *testing.T, store, home, dsn string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if store == "postgres" {
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		rows, err := conn.Query(t.Context(), `SELECT server || '/' || principal, sealed FROM bub_upstream_credentials`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var where string
			var sealed []byte
			if err := rows.Scan(&where, &sealed); err != nil {
				t.Fatal(err)
			}
			out["row "+where] = sealed
		}
		return out
	}
	filepath.Walk(filepath.Join(home, "upstreams", "credentials"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".json") {
			b, _ := os.ReadFile(p)
			out[p] = b
		}
		return nil
	})
	return out
}

// waitTool waits until c lists tool.
func waitTool(t *testing.T, c *client.Client, tool string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == tool {
				return
			}
		}
	}
	t.Fatalf("%s never listed", tool)
}
