package upstream

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// oauthHost is an App whose upstream "up" (auth = "oauth") is an
// in-process MCP server accepting the bearer tokens of tokens (by
// principal); it records which token each request carried.
type oauthHost struct {
	m    *Module
	u    *upstream
	mu   sync.Mutex
	seen map[string]int // Authorization header → requests
}

func newOAuthHost(t *testing.T, extra string, tokens map[string]string) *oauthHost {
	t.Helper()
	s := server.NewMCPServer("oauth-upstream", "1")
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo: " + req.GetString("text", "")), nil
	})
	s.AddResource(mcp.NewResource("ui://widget/app.html", "widget", mcp.WithMIMEType("text/html")),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/html", Text: "<p>widget</p>"}}, nil
		})
	inner := server.NewStreamableHTTPServer(s, server.WithStateful(true))
	h := &oauthHost{seen: map[string]int{}}
	valid := map[string]bool{}
	for _, tok := range tokens {
		valid["Bearer "+tok] = true
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		h.mu.Lock()
		h.seen[auth]++
		h.mu.Unlock()
		if !valid[auth] {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	home := t.TempDir()
	src := "[upstreams.up]\nurl = \"" + ts.URL + "/mcp\"\nauth = \"oauth\"\n" + extra
	m := upstreamModule(t, home, src)
	h.m, h.u = m, m.list()[0]
	c, err := m.creds()
	if err != nil {
		t.Fatal(err)
	}
	for p, tok := range tokens {
		if err := c.save(t.Context(), "up", p, &tokenSet{Token: transport.Token{AccessToken: tok, TokenType: "Bearer"}, ClientID: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *oauthHost) call(ctx context.Context, principal string) (string, error) {
	tc := &registry.ToolContext{Conn: &registry.Connection{Principal: principal}}
	v, err := h.u.call(ctx, tc, "echo", []byte(`{"text":"hi"}`))
	if err != nil {
		return "", err
	}
	return v.(*Result).text, nil
}

// signOutLive deletes principal's token set from the store, as a logout
// on another replica does, while its connection here stays live.
func (h *oauthHost) signOutLive(t *testing.T, principal string) {
	t.Helper()
	c, _ := h.m.creds()
	if found, err := c.store.Delete(t.Context(), "up", principal); err != nil || !found {
		t.Fatalf("Delete: %v %v", found, err)
	}
	if !h.has(principal) {
		t.Fatalf("%s's connection is gone; the test wants it live", principal)
	}
}

func (h *oauthHost) has(principal string) bool {
	h.u.pool.mu.Lock()
	defer h.u.pool.mu.Unlock()
	_, ok := h.u.pool.conns[principal]
	return ok
}

// Each principal's calls carry its own token over its own connection; at
// most max_connections live (a new principal's closes the least recently
// used idle one; when all are busy the call is refused, naming the key);
// one unused for idle_timeout is closed; a principal without a token is
// asked to sign in, and the anonymous caller is the local principal.
func TestPrincipalConnections(t *testing.T) {
	tokens := map[string]string{"p1": "tok-p1", "p2": "tok-p2", "p3": "tok-p3", LocalPrincipal: "tok-local"}
	h := newOAuthHost(t, "max_connections = 2\nidle_timeout = \"1s\"\n", tokens)
	ctx := t.Context()
	for _, p := range []string{"p1", "p2"} {
		if got, err := h.call(ctx, p); err != nil || got != "echo: hi" {
			t.Fatalf("%s's call: %q %v", p, got, err)
		}
	}
	if n := h.u.pool.live(); n != 2 {
		t.Errorf("%d live connections; want 2", n)
	}
	if got, err := h.call(ctx, "p3"); err != nil || got != "echo: hi" {
		t.Fatalf("p3's call: %q %v", got, err)
	}
	if h.has("p1") || !h.has("p2") || !h.has("p3") || h.u.pool.live() != 2 {
		t.Errorf("after p3: p1 %v p2 %v p3 %v; want p1, the least recently used, closed", h.has("p1"), h.has("p2"), h.has("p3"))
	}
	// Both connections busy: a third principal is refused.
	var releases []func()
	for _, p := range []string{"p2", "p3"} {
		_, release, err := h.u.principalSession(ctx, nil, p)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	if _, err := h.call(ctx, "p1"); err == nil || !strings.Contains(err.Error(), "upstreams.up.max_connections") {
		t.Errorf("a call with every connection busy: %v; want a refusal naming upstreams.up.max_connections", err)
	}
	for _, r := range releases {
		r()
	}
	// The anonymous caller is the local principal, with its own token.
	if got, err := h.call(ctx, ""); err != nil || got != "echo: hi" {
		t.Fatalf("the local principal's call: %q %v", got, err)
	}
	// No token: the call asks to sign in (no HTTP transport here: with
	// bub-mcp login), and no request went out with another's token.
	// Other principals' connections may talk meanwhile (an idle one
	// closing sends its DELETE): only a request without a token can be
	// p9's, since p9 has none.
	before := h.tokenless()
	if _, err := h.call(ctx, "p9"); err == nil || !strings.Contains(err.Error(), "bub-mcp login up") {
		t.Errorf("p9's call: %v; want a sign-in request", err)
	}
	if h.tokenless() != before {
		t.Error("p9's call sent requests to the upstream")
	}
	h.mu.Lock()
	for auth := range h.seen {
		if auth != "" && !strings.HasPrefix(auth, "Bearer tok-") {
			t.Errorf("the upstream got Authorization %q", auth)
		}
	}
	for p, tok := range tokens {
		if h.seen["Bearer "+tok] == 0 {
			t.Errorf("no request carried %s's token", p)
		}
	}
	h.mu.Unlock()
	// Idle connections close.
	for deadline := time.Now().Add(20 * time.Second); h.u.pool.live() > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still live after idle_timeout", h.u.pool.live())
		}
	}
}

// A logout in another process (the token set deleted from the store) is
// seen at the principal's next call, though its connection is live: it is
// asked to sign in again, and others are not. Logout --all deletes the
// rest.
func TestLogoutSeenByLiveConnection(t *testing.T) {
	h := newOAuthHost(t, "", map[string]string{"p1": "tok-p1", "p2": "tok-p2"})
	ctx := t.Context()
	for _, p := range []string{"p1", "p2"} {
		if _, err := h.call(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	h.signOutLive(t, "p1")
	if _, err := h.call(ctx, "p1"); err == nil || !strings.Contains(err.Error(), "sign in") {
		t.Errorf("p1 after logout: %v; want a sign-in request", err)
	}
	if h.has("p1") {
		t.Error("p1's connection outlived its logout")
	}
	if _, err := h.call(ctx, "p2"); err != nil {
		t.Errorf("p2 after p1's logout: %v", err)
	}
	gone, err := h.m.Logout(ctx, "up", "", true, "tester")
	if err != nil || len(gone) != 1 || gone[0].Principal != "p2" {
		t.Errorf("Logout --all: %v %v; want p2", gone, err)
	}
}

// tokenless is how many requests came without an Authorization header.
func (h *oauthHost) tokenless() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[""]
}

// The sign-in pages refuse what they must: a link for another server, a
// link or callback state not sealed by this server (or tampered), an
// error from the authorization server, and a response naming another
// authorization server (RFC 9207 iss); none stores a token set.
func TestSignInRefusals(t *testing.T) {
	h := newOAuthHost(t, "", nil)
	mux := http.NewServeMux()
	for pattern, handler := range h.m.LoginRoutes() {
		mux.Handle(pattern, handler)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	h.m.SetLoginBase(ts.URL)
	c, err := h.m.creds()
	if err != nil {
		t.Fatal(err)
	}
	link, err := h.u.loginLink("alice")
	if err != nil || !strings.HasPrefix(link, ts.URL+"/upstreams/up/login?state=") {
		t.Fatalf("loginLink: %q %v", link, err)
	}
	state := strings.TrimPrefix(link, ts.URL+"/upstreams/up/login?state=")
	callbackState := func(exp time.Time) string {
		return c.sealState(&loginState{Kind: "callback", Server: "up", Principal: "alice", Expires: exp.Unix(), Nonce: newNonce(),
			Redirect: ts.URL + CallbackPath, Verifier: "v", ClientID: "c"})
	}
	tests := []struct {
		name, path string
		status     int
		want       string
	}{
		{"a link for another server", "/upstreams/other/login?state=" + state, 400, "another server"},
		{"no state", "/upstreams/up/login", 400, "malformed"},
		{"a state of another key", "/upstreams/up/login?state=" + sealedElsewhere(t), 400, "not sealed by this server"},
		{"a start state as callback", CallbackPath + "?code=x&state=" + state, 400, "not sealed by this server"},
		{"an expired callback", CallbackPath + "?code=x&state=" + callbackState(time.Now().Add(-time.Minute)), 400, "expired"},
		{"the authorization server's error", CallbackPath + "?error=access_denied&state=" + callbackState(time.Now().Add(time.Minute)), 400, "access_denied"},
		{"another issuer", CallbackPath + "?code=x&iss=https%3A%2F%2Fevil.example&state=" + callbackState(time.Now().Add(time.Minute)), 400, "another authorization server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := http.Get(ts.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
				t.Errorf("%d %s; want %d and %q", res.StatusCode, b, tt.status, tt.want)
			}
		})
	}
	if ps, _ := c.store.Principals(t.Context(), "up"); len(ps) != 0 {
		t.Errorf("token sets stored: %v", ps)
	}
}

// sealedElsewhere is a start state sealed with another key.
func sealedElsewhere(t *testing.T) string {
	other, err := newSealer(bytes.Repeat([]byte{9}, 32), loginStateInfo)
	if err != nil {
		t.Fatal(err)
	}
	c := &credentials{state: other}
	return c.sealState(&loginState{Kind: "start", Server: "up", Principal: "alice", Expires: time.Now().Add(time.Minute).Unix(), Nonce: newNonce()})
}

// upstreamModule is the upstream module of an App over the bub.toml src
// in home (its workspace inside), closed with the test.
func upstreamModule(t *testing.T, home, src string) *Module {
	t.Helper()
	return upstreamModuleEnv(t, home, src, func(string) string { return "" })
}

// upstreamModuleEnv is upstreamModule with getenv as the environment.
func upstreamModuleEnv(t *testing.T, home, src string, getenv func(string) string) *Module {
	t.Helper()
	cfg, err := config.Parse(filepath.Join(home, "bub.toml"), src, getenv)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(home, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{"upstream"},
		Home: home, Workspace: ws, Getenv: getenv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	m, _ := FromApp(a)
	return m
}
