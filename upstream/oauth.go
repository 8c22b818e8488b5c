package upstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/internal/statekey"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// This file is the OAuth side of auth = "oauth" servers: bub-mcp is the
// server's OAuth client (mcp-go's client OAuth: discovery from the 401 and
// RFC 9728 metadata, dynamic registration, PKCE, refresh), one connection
// per principal, and the sign-in that gets a principal's first token:
// through bub-mcp's own start page and callback on the HTTP transport
// (LoginRoutes), or a loopback redirect for the local user (Login).
//
// Tool list rule: an auth = "oauth" server has no shared connection. Its
// tools are the list remembered under $BUB_HOME/upstreams (from the last
// connection of any principal, or from `bub-mcp login`); a principal's
// connection lists them when none is known, and list_changed on any
// principal's connection reloads them for everyone. Every call still goes
// over the caller's own connection with the caller's own token, so the
// server authorizes each call as that principal.

// Paths of the sign-in on the HTTP transport.
const (
	// LoginPathPattern is the start page a login link points to.
	LoginPathPattern = "GET /upstreams/{name}/login"
	// CallbackPath is the redirect URI bub-mcp registers at the
	// upstreams' authorization servers.
	CallbackPath = "/upstreams/oauth/callback"
)

// loginTTL bounds a login link and a sign-in in progress.
const loginTTL = 10 * time.Minute

// nonceGrace is how long past a login state's expiry its mark is kept:
// replicas whose clocks differ by less never take a used state for a
// fresh one.
const nonceGrace = time.Minute

// loginStateInfo is the HKDF info of the login state key.
const loginStateInfo = "bub-mcp upstream login state v1"

// loadKey finds the server's secret the credentials key derives from: the
// requestState key's source ($BUB_STATE_KEY, [server] state_key, else
// $BUB_HOME/state.key).
func loadKey(getenv func(string) string, stateKey, home string) ([]byte, error) {
	k, err := statekey.Load(statekey.Configured(getenv, stateKey), home)
	if err != nil {
		return nil, fmt.Errorf("upstream credentials: %w", err)
	}
	return k, nil
}

// loginState is what a login link (Kind "start") and the state parameter
// of an authorization request (Kind "callback") carry, sealed: who signs
// in to which server, until when, once (Nonce); the callback's also the
// PKCE verifier and the OAuth client the code is for.
type loginState struct {
	Kind         string `json:"k"`
	Server       string `json:"s"`
	Principal    string `json:"p"`
	Expires      int64  `json:"e"`
	Nonce        string `json:"n"`
	Redirect     string `json:"r,omitempty"`
	Verifier     string `json:"v,omitempty"`
	ClientID     string `json:"c,omitempty"`
	ClientSecret string `json:"cs,omitempty"`
	AuthMethod   string `json:"am,omitempty"`
}

// sealState seals a login state for the URL.
func (c *credentials) sealState(st *loginState) string {
	b, _ := json.Marshal(st)
	return base64.RawURLEncoding.EncodeToString(c.state.seal(b, []byte(st.Kind)))
}

// openState opens a login state of kind, checking its expiry and using up
// its nonce in the credential store, so that it opens once in all the
// processes (replicas) sharing the store.
func (m *Module) openState(ctx context.Context, c *credentials, kind, s string) (*loginState, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || s == "" || len(s) > 8192 {
		return nil, errors.New("malformed state")
	}
	plain, err := c.state.open(b, []byte(kind))
	if err != nil {
		return nil, errors.New("state not sealed by this server")
	}
	var st loginState
	if err := json.Unmarshal(plain, &st); err != nil || st.Kind != kind || st.Nonce == "" {
		return nil, errors.New("malformed state")
	}
	if time.Now().Unix() > st.Expires {
		return nil, errors.New("the link has expired; call the tool again for a new one")
	}
	fresh, err := c.store.UseNonce(ctx, st.Nonce, time.Unix(st.Expires, 0).Add(nonceGrace))
	switch {
	case errors.Is(err, ErrTooManyLogins):
		return nil, err
	case err != nil:
		m.log.Error("upstream.login", "error", err)
		return nil, errors.New("bub-mcp cannot reach its credential store; try again later")
	case !fresh && kind == "callback":
		return nil, errors.New("this sign-in response was already used (here or on another bub-mcp replica); call the tool again for a new link")
	case !fresh:
		return nil, errors.New("the link was already used (here or on another bub-mcp replica); call the tool again for a new one")
	}
	return &st, nil
}

func newNonce() string {
	n, _ := transport.GenerateRandomString(22)
	return n
}

// LoginRoutes are the handlers, by ServeMux pattern, of the sign-in of
// auth = "oauth" servers on the HTTP transport (always: a reload may
// mount such a server later); SetLoginBase turns it on.
func (m *Module) LoginRoutes() map[string]http.Handler {
	return map[string]http.Handler{
		LoginPathPattern:      http.HandlerFunc(m.serveLoginStart),
		"GET " + CallbackPath: http.HandlerFunc(m.serveCallback),
	}
}

// SetLoginBase says where the HTTP transport serving LoginRoutes is
// reached (public_url, else http://<address>): login links point to base,
// and base + CallbackPath is the redirect URI. Without it, a call that
// needs a sign-in says to run `bub-mcp login`.
func (m *Module) SetLoginBase(base string) {
	m.loginMu.Lock()
	m.loginBase = strings.TrimRight(base, "/")
	m.loginMu.Unlock()
}

// loginPage answers the browser with a short page.
func loginPage(w http.ResponseWriter, status int, title, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>%s</title><h1>%s</h1><p>%s</p>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(msg))
}

// serveLoginStart is the page a login link opens: it checks the link,
// registers bub-mcp at the server's authorization server when it has no
// client id, and sends the browser there.
func (m *Module) serveLoginStart(w http.ResponseWriter, r *http.Request) {
	c, err := m.creds()
	if err != nil {
		m.log.Error("upstream.login", "error", err)
		loginPage(w, http.StatusInternalServerError, "Sign-in unavailable", "bub-mcp cannot reach its credential store; see its log.")
		return
	}
	name := r.PathValue("name")
	st, err := m.openState(r.Context(), c, "start", r.URL.Query().Get("state"))
	if err == nil && st.Server != name {
		err = errors.New("the link is for another server")
	}
	if err != nil {
		loginPage(w, http.StatusBadRequest, "Invalid sign-in link", err.Error())
		return
	}
	u, ok := m.byName(name)
	if !ok || u.cfg.Auth != AuthOAuth {
		loginPage(w, http.StatusNotFound, "Unknown server", "bub-mcp mounts no server "+name+" with auth = \"oauth\".")
		return
	}
	m.loginMu.Lock()
	redirect := m.loginBase + CallbackPath
	m.loginMu.Unlock()
	authURL, err := m.beginLogin(r.Context(), c, u, st.Principal, redirect)
	if err != nil {
		m.log.Warn("upstream.login", "upstream", name, "principal", st.Principal, "error", err)
		loginPage(w, http.StatusBadGateway, "Sign-in failed", "Could not start the sign-in at "+name+"'s authorization server: "+err.Error())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, authURL, http.StatusFound)
}

// serveCallback is the redirect URI: it exchanges the code for the
// principal the state names and stores the token set.
func (m *Module) serveCallback(w http.ResponseWriter, r *http.Request) {
	c, err := m.creds()
	if err != nil {
		m.log.Error("upstream.login", "error", err)
		loginPage(w, http.StatusInternalServerError, "Sign-in unavailable", "bub-mcp cannot reach its credential store; see its log.")
		return
	}
	server, principal, err := m.finishLogin(r.Context(), c, r.URL.Query())
	if err != nil {
		m.log.Warn("upstream.login", "upstream", server, "principal", principal, "error", err)
		loginPage(w, http.StatusBadRequest, "Sign-in failed", err.Error())
		return
	}
	loginPage(w, http.StatusOK, "Signed in", "bub-mcp now calls "+server+" as you. Close this window and call the tool again.")
}

// oauthConfig is the OAuth client configuration for server u.
func (u *upstream) oauthConfig(redirect string) transport.OAuthConfig {
	oc := transport.OAuthConfig{
		ClientID:    u.cfg.ClientID,
		RedirectURI: redirect,
		Scopes:      u.cfg.Scopes,
		PKCEEnabled: true,
		HTTPClient:  u.httpClient(),
	}
	if u.cfg.ClientSecretEnv != "" {
		oc.ClientSecret = u.m.app.Getenv(u.cfg.ClientSecretEnv)
	}
	return oc
}

// discoveryURL is the server's URL without its query: the base mcp-go
// discovers metadata from (a query may hold a secret).
func (u *upstream) discoveryURL() string {
	p, err := url.Parse(u.cfg.URL)
	if err != nil {
		return u.cfg.URL
	}
	p.RawQuery, p.Fragment = "", ""
	return p.String()
}

// oauthHandler is an OAuth client of u's authorization server with oc,
// which every OAuth request of bub-mcp's to it goes through (sign-in,
// refresh, revocation), so all find the same authorization server:
// discovery from the server's URL without its query, guided by its 401
// (probe).
func (u *upstream) oauthHandler(ctx context.Context, oc transport.OAuthConfig) *transport.OAuthHandler {
	h := transport.NewOAuthHandler(oc)
	h.SetBaseURL(u.discoveryURL())
	u.probe(ctx, h)
	return h
}

// beginLogin prepares a sign-in of principal at u's authorization server
// and returns the URL to send the browser to: discovery (the server's 401
// first, for its resource_metadata), dynamic registration without a
// configured client_id, PKCE.
func (m *Module) beginLogin(ctx context.Context, c *credentials, u *upstream, principal, redirect string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	if u.cfg.ClientSecretEnv != "" && m.app.Getenv(u.cfg.ClientSecretEnv) == "" {
		return "", fmt.Errorf("client_secret_env: $%s is empty or unset", u.cfg.ClientSecretEnv)
	}
	h := u.oauthHandler(ctx, u.oauthConfig(redirect))
	if u.cfg.ClientID == "" {
		if err := h.RegisterClient(ctx, u.cfg.ClientName); err != nil {
			return "", hideURL(fmt.Errorf("dynamic client registration: %w", err), u.cfg.URL)
		}
	}
	verifier, err := transport.GenerateCodeVerifier()
	if err != nil {
		return "", err
	}
	st := &loginState{Kind: "callback", Server: u.cfg.name, Principal: principal, Expires: time.Now().Add(loginTTL).Unix(), Nonce: newNonce(),
		Redirect: redirect, Verifier: verifier, ClientID: h.GetClientID(), ClientSecret: h.GetClientSecret(), AuthMethod: h.GetTokenEndpointAuthMethod()}
	authURL, err := h.GetAuthorizationURL(ctx, c.sealState(st), transport.GenerateCodeChallenge(verifier))
	if err != nil {
		return "", hideURL(err, u.cfg.URL)
	}
	return authURL, nil
}

// probe sends the server an unauthenticated GET, so that its 401's
// WWW-Authenticate (RFC 9728 resource_metadata) guides discovery; a server
// that answers otherwise leaves discovery to the well-known paths. A GET
// (the event stream) rather than an initialize, so that a server that
// needs no token for it opens no session.
func (u *upstream) probe(ctx context.Context, h *transport.OAuthHandler) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.cfg.URL, nil)
	if err != nil {
		return
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20251125)
	for k, v := range u.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := u.httpClient().Do(req)
	if err != nil {
		return
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		h.HandleUnauthorizedResponse(resp)
	}
}

// finishLogin handles the redirect back from the authorization server:
// the state (sealed by beginLogin, unexpired, unused), RFC 9207's iss, the
// code exchange with the PKCE verifier; the token set is stored for the
// state's principal. It returns whom it signed in where.
func (m *Module) finishLogin(ctx context.Context, c *credentials, q url.Values) (server, principal string, err error) {
	st, err := m.openState(ctx, c, "callback", q.Get("state"))
	if err != nil {
		return "", "", err
	}
	server, principal = st.Server, st.Principal
	if e := q.Get("error"); e != "" {
		return server, principal, fmt.Errorf("the authorization server answered %s: %s", e, q.Get("error_description"))
	}
	u, ok := m.byName(st.Server)
	if !ok || u.cfg.Auth != AuthOAuth {
		return server, principal, fmt.Errorf("bub-mcp no longer mounts %s with auth = \"oauth\"", st.Server)
	}
	ctx, cancel := context.WithTimeout(ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	oc := u.oauthConfig(st.Redirect)
	oc.ClientID, oc.ClientSecret, oc.TokenEndpointAuthMethod = st.ClientID, st.ClientSecret, st.AuthMethod
	got := transport.NewMemoryTokenStore()
	oc.TokenStore = got
	h := u.oauthHandler(ctx, oc)
	md, err := h.GetServerMetadata(ctx)
	if err != nil {
		return server, principal, hideURL(fmt.Errorf("authorization server metadata: %w", err), u.cfg.URL)
	}
	// RFC 9207: a response from another authorization server (a mix-up)
	// is refused.
	if iss := q.Get("iss"); iss != "" && strings.TrimSuffix(iss, "/") != strings.TrimSuffix(md.Issuer, "/") {
		return server, principal, errors.New("the response names another authorization server (iss)")
	}
	state := q.Get("state")
	h.SetExpectedState(state)
	if err := h.ProcessAuthorizationResponse(ctx, q.Get("code"), state, st.Verifier); err != nil {
		return server, principal, hideURL(fmt.Errorf("code exchange: %w", err), u.cfg.URL)
	}
	tok, err := got.GetToken(ctx)
	if err != nil {
		return server, principal, err
	}
	set := &tokenSet{Token: *tok, ClientID: st.ClientID, ClientSecret: st.ClientSecret, AuthMethod: st.AuthMethod}
	if err := c.save(ctx, server, principal, set); err != nil {
		return server, principal, err
	}
	u.pool.drop(principal) // a connection that failed for want of a token starts over
	m.signalLogin()
	m.log.Info("upstream.login", "upstream", server, "principal", principal)
	m.auditCredentials("upstream.login", principal, server, principal)
	return server, principal, nil
}

// loginRequired is the error of a call whose principal has no usable
// token: a link to bub-mcp's start page for this principal and server,
// or, without the HTTP transport, the command that signs the local user in.
func (u *upstream) loginRequired(principal string) error {
	link, err := u.loginLink(principal)
	if err != nil {
		return err
	}
	return u.linkError(link)
}

// linkError is loginRequired's error for link ("" without the HTTP
// transport).
func (u *upstream) linkError(link string) error {
	if link == "" {
		return &registry.Error{Kind: registry.KindConfig, Message: fmt.Sprintf(
			"upstream %s needs you to sign in (auth = \"oauth\"): run `bub-mcp login %s`, then call the tool again", u.cfg.name, u.cfg.name)}
	}
	// The link is in Details, which the client shows after the message,
	// and not in the message, which the audit log keeps: whoever opens it
	// signs the principal in, so it is written nowhere else.
	msg := fmt.Sprintf("upstream %s needs you to sign in (auth = \"oauth\"): open login_url in a browser (valid for %s, once), then call the tool again", u.cfg.name, loginTTL)
	return &registry.Error{Kind: registry.KindConfig, Message: msg, Details: map[string]any{"login_url": link}}
}

// loginLink is a fresh login link for principal: sealed, expiring in
// loginTTL, good once; "" without the HTTP transport.
func (u *upstream) loginLink(principal string) (string, error) {
	m := u.m
	c, err := m.creds()
	if err != nil {
		return "", &registry.Error{Kind: registry.KindConfig, Message: fmt.Sprintf("upstream %s: %v", u.cfg.name, err)}
	}
	m.loginMu.Lock()
	base := m.loginBase
	m.loginMu.Unlock()
	if base == "" {
		return "", nil
	}
	st := &loginState{Kind: "start", Server: u.cfg.name, Principal: principal, Expires: time.Now().Add(loginTTL).Unix(), Nonce: newNonce()}
	return base + "/upstreams/" + url.PathEscape(u.cfg.name) + "/login?state=" + c.sealState(st), nil
}

// signInPoll is how often a call waiting for its principal's sign-in
// looks at the store, for a sign-in finished by another replica; one in
// this process wakes it at once.
const signInPoll = 2 * time.Second

// signIn is what a call whose principal has no token does first: with a
// client that takes URL-mode elicitation, it sends the user to a login
// link and, once the user accepts, waits (at most loginTTL, or until the
// call ends) for the sign-in to finish, then returns nil so the call goes
// on. Otherwise, or when the user declines, it returns the tool error
// carrying the link.
func (u *upstream) signIn(ctx context.Context, tc *registry.ToolContext, principal string) error {
	link, err := u.loginLink(principal)
	if err != nil {
		return err
	}
	if link == "" || !tc.CanElicitURL(ctx) {
		return u.linkError(link)
	}
	res, err := tc.Elicit(ctx, registry.ElicitRequest{Message: fmt.Sprintf("Sign in to %s, so that bub-mcp calls it as you.", u.cfg.name),
		URL: link, Key: "upstream-login-" + u.cfg.name})
	if err != nil || res.Action != "accept" {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return u.linkError(link)
	}
	c, err := u.m.creds()
	if err != nil {
		return err
	}
	wait := time.NewTimer(loginTTL)
	defer wait.Stop()
	poll := time.NewTicker(signInPoll)
	defer poll.Stop()
	for {
		signal := u.m.loginSignal()
		if _, err := c.load(ctx, u.cfg.name, principal); err == nil {
			return nil
		}
		select {
		case <-signal:
		case <-poll.C:
		case <-wait.C:
			return u.linkError(link)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// loginSignal is closed at the next sign-in finished in this process.
func (m *Module) loginSignal() <-chan struct{} {
	m.loginMu.Lock()
	defer m.loginMu.Unlock()
	if m.loginDone == nil {
		m.loginDone = make(chan struct{})
	}
	return m.loginDone
}

// signalLogin wakes the calls waiting for a sign-in.
func (m *Module) signalLogin() {
	m.loginMu.Lock()
	defer m.loginMu.Unlock()
	if m.loginDone != nil {
		close(m.loginDone)
		m.loginDone = nil
	}
}

// Login signs the local user in to server name with a loopback redirect
// (as mcp-remote does): show is given the URL to open in a browser; Login
// waits, at most loginTTL or until ctx ends, for the browser to come back,
// stores the token set for LocalPrincipal and lists the server's tools
// with it, which are remembered for the next start.
func (m *Module) Login(ctx context.Context, name string, show func(authURL string)) error {
	u, ok := m.byName(name)
	if !ok {
		return fmt.Errorf("no upstream %q (see `bub-mcp upstreams`)", name)
	}
	if u.cfg.Auth != AuthOAuth {
		return fmt.Errorf("upstream %s does not sign in: set auth = \"oauth\" in [upstreams.%s]", name, name)
	}
	c, err := m.creds()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("login: loopback listener: %w", err)
	}
	defer ln.Close()
	redirect := "http://" + ln.Addr().String() + "/callback"
	authURL, err := m.beginLogin(ctx, c, u, LocalPrincipal, redirect)
	if err != nil {
		return fmt.Errorf("login %s: %w", name, err)
	}
	done := make(chan error, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		_, _, err := m.finishLogin(r.Context(), c, r.URL.Query())
		if err != nil {
			loginPage(w, http.StatusBadRequest, "Sign-in failed", err.Error())
		} else {
			loginPage(w, http.StatusOK, "Signed in", "bub-mcp can now call "+name+" as you. You can close this window.")
		}
		select {
		case done <- err:
		default:
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	show(authURL)
	t := time.NewTimer(loginTTL)
	defer t.Stop()
	select {
	case err = <-done:
	case <-t.C:
		err = fmt.Errorf("no sign-in within %s", loginTTL)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("login %s: %w", name, err)
	}
	// The tools, listed with the new token, are remembered.
	s, release, err := u.principalSession(ctx, nil, LocalPrincipal)
	if err != nil {
		return fmt.Errorf("login %s: signed in, but listing the tools failed: %w", name, err)
	}
	defer release()
	lctx, cancel := context.WithTimeout(ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	raws, err := listTools(lctx, s, &u.seq)
	if err != nil {
		return fmt.Errorf("login %s: signed in, but listing the tools failed: %w", name, hideURL(err, u.cfg.URL))
	}
	m.remember(u.cfg, raws)
	return nil
}

// Logout deletes the token sets of server name: principal's, or every
// principal's with all; by (who asked) goes in the audit record of each.
// Before deleting a set it revokes its tokens at the server's
// authorization server (RFC 7009), when that names a revocation endpoint;
// the set is deleted whether or not that works, and each result says
// which happened. It returns the principals whose set it deleted.
func (m *Module) Logout(ctx context.Context, name, principal string, all bool, by string) ([]LogoutResult, error) {
	u, ok := m.byName(name)
	if !ok {
		return nil, fmt.Errorf("no upstream %q (see `bub-mcp upstreams`)", name)
	}
	if u.cfg.Auth != AuthOAuth {
		return nil, fmt.Errorf("upstream %s keeps no per-principal tokens (auth is not \"oauth\")", name)
	}
	c, err := m.creds()
	if err != nil {
		return nil, err
	}
	who := []string{principalOf(principal)}
	if all {
		if who, err = c.store.Principals(ctx, name); err != nil {
			return nil, err
		}
	}
	rv := &revoker{u: u}
	var out []LogoutResult
	for _, p := range who {
		res, found, err := m.logout(ctx, c, rv, u, p)
		if err != nil {
			return out, err
		}
		u.pool.drop(p)
		if found {
			out = append(out, res)
			m.auditCredentials("upstream.logout", by, name, p)
		}
	}
	return out, nil
}

// logout revokes and deletes principal's token set at u, holding it
// against a refresh in another process meanwhile (which would replace
// the refresh token being revoked).
func (m *Module) logout(ctx context.Context, c *credentials, rv *revoker, u *upstream, principal string) (LogoutResult, bool, error) {
	name := u.cfg.name
	res := LogoutResult{Principal: principal}
	lctx, cancel := context.WithTimeout(ctx, u.cfg.StartTimeout.Duration)
	unlock, err := c.lock(lctx, name, principal)
	cancel()
	if err != nil {
		res.NotRevoked = fmt.Sprintf("could not hold the token set against a refresh: %v", err)
		unlock = func() {}
	}
	defer unlock()
	if err == nil {
		set, err := c.load(ctx, name, principal)
		switch {
		case errors.Is(err, ErrNoCredentials):
			// Either there is none (and Delete finds none, so this result
			// is dropped) or it does not open.
			res.NotRevoked = "the stored token set does not open with this server's key"
		case err != nil:
			res.NotRevoked = err.Error()
		default:
			if err := rv.revoke(ctx, set); err != nil {
				res.NotRevoked = err.Error()
			} else {
				res.Revoked = true
			}
		}
	}
	found, err := c.store.Delete(ctx, name, principal)
	if err != nil {
		return res, false, err
	}
	if found {
		if res.Revoked {
			m.log.Info("upstream.revoke", "upstream", name, "principal", principal)
		} else {
			m.log.Warn("upstream.revoke", "upstream", name, "principal", principal, "error", res.NotRevoked)
		}
	}
	return res, found, nil
}

// Principals lists the principals with a token set for server name.
func (m *Module) Principals(ctx context.Context, name string) ([]string, error) {
	c, err := m.creds()
	if err != nil {
		return nil, err
	}
	return c.store.Principals(ctx, name)
}

// auditCredentials writes the audit record of a sign-in or logout (tool
// upstream.login or upstream.logout) of principal at server; it names
// them only, never a token.
func (m *Module) auditCredentials(tool, by, server, principal string) {
	args, _ := json.Marshal(map[string]string{"upstream": server, "principal": principal})
	m.app.Audit(audit.Record{Principal: by, Transport: "upstream", Mode: "credentials", Tool: tool, Args: args, Outcome: "ok"})
}
