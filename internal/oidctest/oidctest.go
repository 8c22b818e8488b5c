// Package oidctest gives tests a real OpenID provider: Ory Hydra v2 (built
// from the Go module proxy by scripts/oidc-setup.sh), one per test binary,
// on free loopback ports with an in-memory database, stopped when the tests
// end. Tokens come from a real authorization-code flow with PKCE: an HTTP
// client with a cookie jar follows Hydra's redirects to a small login and
// consent app served by this package, which accepts the login as the
// subject the test asked for and grants the scopes, audience and extra
// claims the test asked for. Without the binary a test skips, except under
// CI=true, where it fails.
package oidctest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"go/build"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// HydraVersion is the Hydra release scripts/oidc-setup.sh builds.
const HydraVersion = "v2.3.0"

var (
	once     sync.Once
	shared   *Provider
	startErr error
)

// Provider is a running Hydra.
type Provider struct {
	// Issuer is the issuer identifier exactly as Hydra's discovery
	// document and tokens spell it.
	Issuer string
	// PublicURL and AdminURL are Hydra's two listeners.
	PublicURL, AdminURL string

	cmd    *exec.Cmd
	done   chan struct{}
	logs   *syncBuffer
	app    *httptest.Server
	client *http.Client // for the admin API

	mu      sync.Mutex
	pending map[string]TokenRequest // by OAuth state
	logins  map[string]TokenRequest // by client id, for flows not started here
}

// Run runs the tests and then stops the provider, if one was started. Use
// it from TestMain: os.Exit(oidctest.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	return code
}

// Stop stops the provider if one was started: for a TestMain that runs
// m.Run through another helper (pgtest.Run) and so cannot use Run.
func Stop() {
	if shared != nil {
		shared.stop()
	}
}

// Start returns the test binary's provider, starting it on first use.
func Start(tb testing.TB) *Provider {
	tb.Helper()
	once.Do(func() { shared, startErr = start() })
	if startErr != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("oidctest: %v (CI=true: the OpenID provider must be available; see scripts/oidc-setup.sh)", startErr)
		}
		tb.Skipf("oidctest: %v (run scripts/oidc-setup.sh to build it)", startErr)
	}
	return shared
}

// Binary returns the path of the Hydra binary: $BUB_HYDRA, else
// $(go env GOPATH)/bin/hydra-<HydraVersion>.
func Binary() (string, error) {
	if p := os.Getenv("BUB_HYDRA"); p != "" {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	p := filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "bin", "hydra-"+HydraVersion)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("hydra %s not found at %s", HydraVersion, p)
	}
	return p, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start() (*Provider, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	pub, err := freePort()
	if err != nil {
		return nil, err
	}
	adm, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Provider{
		PublicURL: fmt.Sprintf("http://127.0.0.1:%d", pub),
		AdminURL:  fmt.Sprintf("http://127.0.0.1:%d", adm),
		logs:      &syncBuffer{},
		client:    &http.Client{Timeout: 10 * time.Second},
		pending:   map[string]TokenRequest{},
		logins:    map[string]TokenRequest{},
		done:      make(chan struct{}),
	}
	p.app = httptest.NewServer(p.appHandler())
	dir, err := os.MkdirTemp("", "oidctest-")
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	config := fmt.Sprintf(`dsn: memory
serve:
  public: {host: 127.0.0.1, port: %d}
  admin: {host: 127.0.0.1, port: %d}
urls:
  self: {issuer: %s}
  login: %s/login
  consent: %s/consent
secrets:
  system: [%q]
strategies:
  access_token: jwt
oauth2:
  allowed_top_level_claims: [groups, email, email_verified, preferred_username, roles]
  mirror_top_level_claims: false
log:
  level: warn
`, pub, adm, p.PublicURL, p.app.URL, p.app.URL, base64.RawURLEncoding.EncodeToString(secret))
	cfg := filepath.Join(dir, "hydra.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out", "-c", cfg)
	cmd.Env = append(os.Environ(), "SQA_OPT_OUT=true")
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p.cmd = cmd
	go func() { _ = cmd.Wait(); os.RemoveAll(dir); close(p.done) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := p.client.Get(p.AdminURL + "/health/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("hydra exited: %s", p.logs.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("hydra not ready after 60s: %s", p.logs.tail())
		}
	}
	var disc struct {
		Issuer string `json:"issuer"`
	}
	if err := p.getJSON(p.PublicURL+"/.well-known/openid-configuration", &disc); err != nil {
		p.stop()
		return nil, err
	}
	p.Issuer = disc.Issuer
	return p, nil
}

func (p *Provider) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	if p.app != nil {
		p.app.Close()
	}
}

// Logs returns the provider's output so far, for a failing test.
func (p *Provider) Logs() string { return p.logs.tail() }

// Client is an OAuth client registered at the provider.
type Client struct {
	ID, Secret string
	// RedirectURI is the test's own callback, which the token flows of
	// this package use; it is registered only for a client made without
	// ClientOptions.RedirectURIs, so those flows need such a client.
	RedirectURI string
}

// ClientOptions describe a client to register.
type ClientOptions struct {
	// Audience lists the audiences the client may ask for (RFC 8707
	// resources, in Hydra's `audience` form).
	Audience []string
	// Scopes the client may ask for; "openid" is always allowed.
	Scopes []string
	// Opaque makes the client's access tokens opaque (for introspection)
	// instead of JWTs.
	Opaque bool
	// RedirectURIs replace the test's own callback: for a client that
	// runs the flow itself (bub-mcp's authorization-server front).
	RedirectURIs []string
	// Login answers the login and consent of flows this package did not
	// start (their state is not the test's): the subject to sign in as
	// and the claims put in both the access and the ID token.
	Login *TokenRequest
}

// NewClient registers a confidential client for the authorization-code
// flow through the admin API.
func (p *Provider) NewClient(tb testing.TB, o ClientOptions) Client {
	tb.Helper()
	strategy := "jwt"
	if o.Opaque {
		strategy = "opaque"
	}
	redirect := p.app.URL + "/callback"
	redirects := []string{redirect}
	if len(o.RedirectURIs) > 0 {
		redirects = o.RedirectURIs
	}
	body := map[string]any{
		"client_name":                "bub-mcp test",
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"scope":                      strings.Join(append([]string{"openid", "offline_access"}, o.Scopes...), " "),
		"audience":                   o.Audience,
		"redirect_uris":              redirects,
		"token_endpoint_auth_method": "client_secret_basic",
		"access_token_strategy":      strategy,
	}
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := p.send(http.MethodPost, p.AdminURL+"/admin/clients", body, &out); err != nil {
		tb.Fatalf("oidctest: creating client: %v\n%s", err, p.Logs())
	}
	if o.Login != nil {
		p.mu.Lock()
		p.logins[out.ClientID] = *o.Login
		p.mu.Unlock()
	}
	return Client{ID: out.ClientID, Secret: out.ClientSecret, RedirectURI: redirect}
}

// SetLogin changes whom the login of flows this package did not start
// signs in as for client c (ClientOptions.Login): a test that signs in
// two users through one client switches between them.
func (p *Provider) SetLogin(c Client, r TokenRequest) {
	p.mu.Lock()
	p.logins[c.ID] = r
	p.mu.Unlock()
}

// TokenRequest is what the test wants in a token: the login's subject, the
// scopes and audience the client asks for (and consent grants), and extra
// access-token claims (groups, email, …) the consent step puts in.
type TokenRequest struct {
	Subject  string
	Scopes   []string
	Audience []string
	Claims   map[string]any
}

// Token is a token response.
type Token struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	IDToken      string `json:"id_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	Scope        string `json:"scope"`
}

// Token runs the authorization-code flow with PKCE S256 for c and returns
// the token response.
func (p *Provider) Token(tb testing.TB, c Client, r TokenRequest) Token {
	tb.Helper()
	t, err := p.token(tb.Context(), c, r)
	if err != nil {
		tb.Fatalf("oidctest: %v\n%s", err, p.Logs())
	}
	return t
}

func (p *Provider) token(ctx context.Context, c Client, r TokenRequest) (Token, error) {
	state, verifier := random(), random()
	sum := sha256.Sum256([]byte(verifier))
	p.mu.Lock()
	p.pending[state] = r
	p.mu.Unlock()
	defer func() { p.mu.Lock(); delete(p.pending, state); p.mu.Unlock() }()

	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {c.ID},
		"redirect_uri":          {c.RedirectURI},
		"scope":                 {strings.Join(append([]string{"openid"}, r.Scopes...), " ")},
		"state":                 {state},
		"nonce":                 {random()},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	if len(r.Audience) > 0 {
		q.Set("audience", strings.Join(r.Audience, " "))
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.PublicURL+"/oauth2/auth?"+q.Encode(), nil)
	resp, err := browser.Do(req)
	if err != nil {
		return Token{}, fmt.Errorf("authorization request: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	final := resp.Request.URL
	if resp.StatusCode != 200 || final.Path != "/callback" {
		return Token{}, fmt.Errorf("authorization flow ended at %s with %s: %s", final.Redacted(), resp.Status, body)
	}
	if got := final.Query().Get("state"); got != state {
		return Token{}, fmt.Errorf("state mismatch in the callback")
	}
	if e := final.Query().Get("error"); e != "" {
		return Token{}, fmt.Errorf("authorization error %s: %s", e, final.Query().Get("error_description"))
	}
	code := final.Query().Get("code")
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {c.RedirectURI},
		"code_verifier": {verifier},
	}
	treq, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.PublicURL+"/oauth2/token", strings.NewReader(form.Encode()))
	treq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	treq.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	tresp, err := p.client.Do(treq)
	if err != nil {
		return Token{}, fmt.Errorf("token request: %w", err)
	}
	defer tresp.Body.Close()
	tbody, _ := io.ReadAll(io.LimitReader(tresp.Body, 1<<20))
	if tresp.StatusCode != 200 {
		return Token{}, fmt.Errorf("token endpoint: %s: %s", tresp.Status, tbody)
	}
	var t Token
	if err := json.Unmarshal(tbody, &t); err != nil {
		return Token{}, fmt.Errorf("token response: %w", err)
	}
	return t, nil
}

// IntrospectionURL is Hydra's RFC 7662 endpoint (on the admin listener,
// which needs no client authentication).
func (p *Provider) IntrospectionURL() string { return p.AdminURL + "/admin/oauth2/introspect" }

// appHandler is the login and consent app Hydra sends the browser to.
func (p *Provider) appHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		challenge := r.URL.Query().Get("login_challenge")
		var lr struct {
			RequestURL string `json:"request_url"`
			Client     struct {
				ID string `json:"client_id"`
			} `json:"client"`
		}
		q := url.Values{"login_challenge": {challenge}}
		if err := p.getJSON(p.AdminURL+"/admin/oauth2/auth/requests/login?"+q.Encode(), &lr); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		tr, ok := p.requestFor(lr.RequestURL, lr.Client.ID)
		if !ok {
			http.Error(w, "oidctest: no pending token request for this login", 400)
			return
		}
		p.accept(w, "login", challenge, map[string]any{"subject": tr.Subject})
	})
	mux.HandleFunc("/consent", func(w http.ResponseWriter, r *http.Request) {
		challenge := r.URL.Query().Get("consent_challenge")
		var cr struct {
			RequestURL string   `json:"request_url"`
			Scopes     []string `json:"requested_scope"`
			Audience   []string `json:"requested_access_token_audience"`
			Client     struct {
				ID string `json:"client_id"`
			} `json:"client"`
		}
		q := url.Values{"consent_challenge": {challenge}}
		if err := p.getJSON(p.AdminURL+"/admin/oauth2/auth/requests/consent?"+q.Encode(), &cr); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		tr, ok := p.requestFor(cr.RequestURL, cr.Client.ID)
		if !ok {
			http.Error(w, "oidctest: no pending token request for this consent", 400)
			return
		}
		p.accept(w, "consent", challenge, map[string]any{
			"grant_scope":                 cr.Scopes,
			"grant_access_token_audience": cr.Audience,
			"session":                     map[string]any{"access_token": tr.Claims, "id_token": tr.Claims},
		})
	})
	mux.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// requestFor finds the test's request by the state in Hydra's request_url,
// else the login registered for the client.
func (p *Provider) requestFor(requestURL, clientID string) (TokenRequest, bool) {
	u, err := url.Parse(requestURL)
	if err != nil {
		return TokenRequest{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if tr, ok := p.pending[u.Query().Get("state")]; ok {
		return tr, true
	}
	tr, ok := p.logins[clientID]
	return tr, ok
}

// accept accepts a login or consent challenge and redirects the browser on.
func (p *Provider) accept(w http.ResponseWriter, kind, challenge string, body map[string]any) {
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	q := url.Values{kind + "_challenge": {challenge}}
	if err := p.send(http.MethodPut, p.AdminURL+"/admin/oauth2/auth/requests/"+kind+"/accept?"+q.Encode(), body, &out); err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set("Location", out.RedirectTo)
	w.WriteHeader(http.StatusFound)
}

func (p *Provider) getJSON(u string, v any) error {
	resp, err := p.client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

func (p *Provider) send(method, u string, body, v any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, _ := http.NewRequest(method, u, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, rb)
	}
	return json.Unmarshal(rb, v)
}

// random returns 43 URL-safe characters: a PKCE verifier's minimum length.
func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// syncBuffer collects the provider's output, keeping the last 64 KiB.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 64<<10 {
		b.buf = b.buf[len(b.buf)-64<<10:]
	}
	return len(p), nil
}

func (b *syncBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := string(b.buf)
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}
