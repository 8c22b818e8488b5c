package asfront_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/asfront"
	"github.com/bubbuild/bub-mcp/internal/oidctest"
)

// answer is an endpoint's status and body, compared whole.
type answer struct {
	Status int
	Body   string
}

func TestMain(m *testing.M) { os.Exit(oidctest.Run(m)) }

// env is a front on loopback in front of the real Hydra, with the
// resource server that checks its tokens.
type env struct {
	t        testing.TB
	srv      *httptest.Server
	front    *asfront.Front
	rs       *auth.ResourceServer
	keys     *auth.KeyRing
	endpoint string
	skew     atomic.Int64 // added to the front's clock, in seconds
}

func (e *env) now() time.Time { return time.Now().Add(time.Duration(e.skew.Load()) * time.Second) }

func newEnv(t testing.TB, mod func(*asfront.Options)) *env {
	t.Helper()
	idp := oidctest.Start(t)
	e := &env{t: t}
	var h http.Handler = http.NotFoundHandler()
	var mu sync.RWMutex
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.RLock()
		defer mu.RUnlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	issuer := e.srv.URL
	e.endpoint = issuer + "/mcp"
	client := idp.NewClient(t, oidctest.ClientOptions{
		RedirectURIs: []string{issuer + asfront.CallbackPath},
		Scopes:       []string{"email", "profile"},
		// The IdP's own scp must not add to what the front grants.
		Login: &oidctest.TokenRequest{Subject: "alice", Claims: map[string]any{
			"groups": []string{"eng"}, "email": "alice@example.com", "email_verified": true, "scp": []string{"admin"}}},
	})
	keys, err := auth.NewKeyRing(t.Context(), auth.KeyRingOptions{Store: auth.FileKeyStore{Path: filepath.Join(t.TempDir(), "keyring.json")}, Now: e.now})
	if err != nil {
		t.Fatal(err)
	}
	e.keys = keys
	opts := asfront.Options{
		Issuer:   issuer,
		Upstream: asfront.Upstream{Issuer: idp.Issuer, ClientID: client.ID, ClientSecret: client.Secret, Scopes: []string{"openid", "email", "profile"}},
		Keys:     keys,
		Store:    asfront.NewFileStore(filepath.Join(t.TempDir(), "oauth.json"), e.now),
		Resource: func(r string) (string, bool) {
			c, err := auth.CanonicalURL("resource", r)
			return c, err == nil && (c == e.endpoint || strings.HasPrefix(c, issuer+"/mcp/p/"))
		},
		DefaultResource: e.endpoint,
		Scopes:          []string{"mcp"},
		Now:             e.now,
	}
	if mod != nil {
		mod(&opts)
	}
	e.front, err = asfront.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.rs, err = auth.NewResourceServer(auth.Options{
		Issuer: issuer, PublicURL: issuer, JWKSURL: e.front.JWKSURL(), HTTPClient: e.front.KeysClient(),
		RequiredScopes: []string{"mcp"}, MinRefetchInterval: time.Millisecond, Now: e.now,
		Rules: []auth.Rule{{Claim: "groups", Value: "eng", Profile: "dev"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	h = e.front.Handler()
	mu.Unlock()
	return e
}

// register registers a client by DCR and returns its id.
func (e *env) register(redirect string) string {
	e.t.Helper()
	status, body := e.post(asfront.RegisterPath, "application/json", fmt.Sprintf(`{"client_name":"Test <Client>","redirect_uris":[%q]}`, redirect))
	if status != 201 {
		e.t.Fatalf("register: %d %s", status, body)
	}
	var out struct {
		ClientID string `json:"client_id"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		e.t.Fatal(err)
	}
	return out.ClientID
}

func (e *env) post(path, ct, body string) (int, string) {
	e.t.Helper()
	res, err := http.Post(e.srv.URL+path, ct, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

// browser is a user agent with a cookie jar that stops at the client's
// redirect URI.
type browser struct {
	*http.Client
	redirect string
}

func (e *env) browser(redirect string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{Client: &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), redirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}}, redirect: redirect}
}

type flow struct {
	clientID, redirect, verifier, state, resource string
}

func newFlow(clientID, redirect, resource string) *flow {
	return &flow{clientID: clientID, redirect: redirect, verifier: strings.Repeat("v", 50) + fmt.Sprint(time.Now().UnixNano()), state: "st-" + fmt.Sprint(time.Now().UnixNano()), resource: resource}
}

func (f *flow) authorizeURL(issuer string) string {
	sum := sha256.Sum256([]byte(f.verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {f.clientID}, "redirect_uri": {f.redirect},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"state": {f.state}, "scope": {"openid mcp offline_access"},
	}
	if f.resource != "" {
		q.Set("resource", f.resource)
	}
	return issuer + asfront.AuthorizePath + "?" + q.Encode()
}

var hidden = regexp.MustCompile(`name="(consent|csrf)" value="([^"]+)"`)

// authorize runs the browser part: /authorize, the IdP, and the consent
// page when one is shown (approve says what to answer). It returns the
// final response: the redirect to the client, or an error page.
func (e *env) authorize(b *browser, f *flow, approve bool) (res *http.Response, body string, consented bool) {
	e.t.Helper()
	res, err := b.Get(f.authorizeURL(e.srv.URL))
	if err != nil {
		e.t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	body = string(raw)
	if res.StatusCode != 200 || !strings.Contains(body, `action="`+e.srv.URL+asfront.ConsentPath+`"`) {
		return res, body, false
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		e.t.Errorf("consent page CSP = %q", csp)
	}
	form := url.Values{"decision": {"deny"}}
	if approve {
		form.Set("decision", "approve")
	}
	for _, m := range hidden.FindAllStringSubmatch(body, -1) {
		form.Set(m[1], m[2])
	}
	res, err = b.PostForm(e.srv.URL+asfront.ConsentPath, form)
	if err != nil {
		e.t.Fatal(err)
	}
	raw, _ = io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(raw), true
}

// code extracts the code from a redirect to the client, checking state and
// iss (RFC 9207).
func (e *env) code(res *http.Response, f *flow) string {
	e.t.Helper()
	if res.StatusCode != 302 {
		e.t.Fatalf("authorization ended with %d, not a redirect to the client", res.StatusCode)
	}
	loc, _ := url.Parse(res.Header.Get("Location"))
	q := loc.Query()
	if q.Get("state") != f.state || q.Get("iss") != e.srv.URL || q.Get("code") == "" {
		e.t.Fatalf("redirect %s: want code, state %q and iss %q", loc, f.state, e.srv.URL)
	}
	return q.Get("code")
}

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	Scope        string `json:"scope"`
	ExpiresIn    int    `json:"expires_in"`
}

func (e *env) token(form url.Values) (int, string, tokenResponse) {
	e.t.Helper()
	status, body := e.post(asfront.TokenPath, "application/x-www-form-urlencoded", form.Encode())
	var tr tokenResponse
	if status == 200 {
		if err := json.Unmarshal([]byte(body), &tr); err != nil {
			e.t.Fatal(err)
		}
	}
	return status, body, tr
}

func codeForm(f *flow, code string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {f.clientID},
		"redirect_uri": {f.redirect}, "code_verifier": {f.verifier}, "resource": {f.resource}}
}

func refreshForm(f *flow, rt string) url.Values {
	return url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {f.clientID}}
}

// verify checks an access token with the resource server for the
// endpoint.
func (e *env) verify(access string) (*auth.Principal, error) {
	req := httptest.NewRequest("POST", e.endpoint, nil)
	req.Header.Set("Authorization", "Bearer "+access)
	return e.rs.Authenticate(e.t.Context(), req)
}

// TestFlow runs the whole flow against the real Hydra: registration,
// sign-in at the IdP, consent on the first grant only, code with PKCE,
// a token the resource server accepts with the IdP's claims mapped to a
// profile, and refresh with rotation.
func TestFlow(t *testing.T) {
	e := newEnv(t, func(o *asfront.Options) { o.Claims = append(slices.Clone(asfront.DefaultClaims), "scp") })
	redirect := "http://127.0.0.1:9/cb"
	id := e.register(redirect)
	b := e.browser(redirect)

	f := newFlow(id, redirect, e.endpoint)
	res, body, consented := e.authorize(b, f, true)
	if !consented {
		t.Fatalf("no consent page before the first grant: %d %s", res.StatusCode, body)
	}
	status, body, tr := e.token(codeForm(f, e.code(res, f)))
	if status != 200 || tr.TokenType != "Bearer" || tr.Scope != "mcp" || tr.RefreshToken == "" {
		t.Fatalf("token: %d %s", status, body)
	}
	p, err := e.verify(tr.AccessToken)
	if err != nil {
		t.Fatalf("the resource server refused the front's token: %v", err)
	}
	want := &auth.Principal{Issuer: e.srv.URL, Subject: "alice", Name: "alice@example.com", ClientID: id, Profiles: []string{"dev"}, Profile: "dev", Scopes: []string{"mcp"}}
	if diff := cmp.Diff(want, p, cmpIgnoreExpiry); diff != "" {
		t.Errorf("principal (-want +got):\n%s", diff)
	}

	// The second sign-in of the same user for the same client needs no
	// consent; a new client does.
	f2 := newFlow(id, redirect, e.endpoint)
	res, _, consented = e.authorize(b, f2, true)
	if consented {
		t.Errorf("consent asked again for a client already allowed")
	}
	e.code(res, f2)
	other := e.register(redirect)
	if _, _, consented := e.authorize(e.browser(redirect), newFlow(other, redirect, e.endpoint), false); !consented {
		t.Errorf("no consent page for another client")
	}

	// Refresh rotates the refresh token.
	status, body, tr2 := e.token(refreshForm(f, tr.RefreshToken))
	if status != 200 || tr2.RefreshToken == tr.RefreshToken || tr2.AccessToken == "" {
		t.Fatalf("refresh: %d %s", status, body)
	}
	if _, err := e.verify(tr2.AccessToken); err != nil {
		t.Errorf("refreshed token refused: %v", err)
	}
}

// A native client registers its loopback redirect URI without a port
// and signs in on whatever port the OS gave it (RFC 8252 §7.3): the code
// goes to that port and is redeemed with it; another path is refused.
func TestLoopbackRedirectAnyPort(t *testing.T) {
	e := newEnv(t, nil)
	id := e.register("http://127.0.0.1/cb")
	redirect := "http://127.0.0.1:9/cb"
	f := newFlow(id, redirect, e.endpoint)
	res, body, _ := e.authorize(e.browser(redirect), f, true)
	if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, redirect+"?") {
		t.Fatalf("authorize: %d %s %q; want a redirect to %s", res.StatusCode, loc, body, redirect)
	}
	if status, body, _ := e.token(codeForm(f, e.code(res, f))); status != 200 {
		t.Errorf("token: %d %s", status, body)
	}
	other := "http://127.0.0.1:9/elsewhere"
	res, body, consented := e.authorize(e.browser(other), newFlow(id, other, e.endpoint), true)
	if consented || res.StatusCode != 400 || !strings.Contains(body, "redirect_uri is not registered for this client") {
		t.Errorf("another path: %d %q (consent %v); want 400, not registered", res.StatusCode, body, consented)
	}
}

var cmpIgnoreExpiry = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Expiry" }, cmp.Ignore())

// TestRefusals checks each refusal's status and body.
func TestRefusals(t *testing.T) {
	e := newEnv(t, nil)
	redirect := "http://127.0.0.1:9/cb"
	id := e.register(redirect)
	b := e.browser(redirect)
	// One consent for the rest.
	first := newFlow(id, redirect, e.endpoint)
	res, _, _ := e.authorize(b, first, true)
	e.code(res, first)

	signIn := func(t *testing.T) (*flow, string) {
		t.Helper()
		f := newFlow(id, redirect, e.endpoint)
		res, _, _ := e.authorize(b, f, true)
		return f, e.code(res, f)
	}
	got := func(status int, body string) answer { return answer{status, body} }

	t.Run("replayed authorization code revokes its tokens", func(t *testing.T) {
		f, code := signIn(t)
		status, body, tr := e.token(codeForm(f, code))
		if status != 200 {
			t.Fatalf("first use: %d %s", status, body)
		}
		status, body, _ = e.token(codeForm(f, code))
		want := answer{400, `{"error":"invalid_grant","error_description":"authorization code already used; the tokens issued for it are revoked"}`}
		if diff := cmp.Diff(want, got(status, body)); diff != "" {
			t.Errorf("replay (-want +got):\n%s", diff)
		}
		status, body, _ = e.token(refreshForm(f, tr.RefreshToken))
		want = answer{400, `{"error":"invalid_grant","error_description":"refresh token revoked"}`}
		if diff := cmp.Diff(want, got(status, body)); diff != "" {
			t.Errorf("refresh after replay (-want +got):\n%s", diff)
		}
	})
	t.Run("callback with an unknown sign-in", func(t *testing.T) {
		res, err := http.Get(e.srv.URL + asfront.CallbackPath + "?state=made-up&code=x")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 400 || !strings.Contains(string(body), "unknown or used sign-in") {
			t.Errorf("callback with a made-up state: %d %s", res.StatusCode, body)
		}
	})
	t.Run("callback naming another issuer (RFC 9207 mix-up)", func(t *testing.T) {
		f := newFlow(id, redirect, e.endpoint)
		stop := e.srv.URL + asfront.CallbackPath
		jar, _ := cookiejar.New(nil)
		idpLeg := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(r.URL.String(), stop) {
				return http.ErrUseLastResponse
			}
			return nil
		}}
		res, err := idpLeg.Get(f.authorizeURL(e.srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		back, err := url.Parse(res.Header.Get("Location"))
		if err != nil || !strings.HasPrefix(back.String(), stop) {
			t.Fatalf("the identity provider sent the browser to %q, not the callback", res.Header.Get("Location"))
		}
		q := back.Query()
		q.Set("iss", "https://evil.example")
		back.RawQuery = q.Encode()
		res, err = b.Get(back.String())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		loc, _ := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != 302 || loc.Query().Get("error") != "access_denied" || loc.Query().Get("code") != "" || loc.Query().Get("state") != f.state {
			t.Errorf("mixed-up callback: %d → %s; want the client told access_denied, no code", res.StatusCode, loc)
		}
	})
	// A code redeemed with one parameter unlike the authorization
	// request's is refused.
	for _, tc := range []struct {
		name, key, value string
		want             answer
	}{
		{"PKCE mismatch", "code_verifier", strings.Repeat("x", 60),
			answer{400, `{"error":"invalid_grant","error_description":"PKCE verification failed"}`}},
		{"redirect URI differs at the token endpoint", "redirect_uri", "http://127.0.0.1:9/other",
			answer{400, `{"error":"invalid_grant","error_description":"redirect_uri differs from the authorization request's"}`}},
		{"code for another client", "client_id", "dcr_someoneelse",
			answer{400, `{"error":"invalid_grant","error_description":"authorization code was issued to another client"}`}},
		{"token request for another resource", "resource", e.srv.URL + "/mcp/p/other",
			answer{400, `{"error":"invalid_target","error_description":"resource differs from the one authorized"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, code := signIn(t)
			form := codeForm(f, code)
			form.Set(tc.key, tc.value)
			status, body, _ := e.token(form)
			if diff := cmp.Diff(tc.want, got(status, body)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("expired code", func(t *testing.T) {
		f, code := signIn(t)
		e.skew.Store(int64(asfront.DefaultCodeTTL/time.Second) + 1)
		defer e.skew.Store(0)
		status, body, _ := e.token(codeForm(f, code))
		want := answer{400, `{"error":"invalid_grant","error_description":"authorization code expired"}`}
		if diff := cmp.Diff(want, got(status, body)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("refresh token reuse revokes the family", func(t *testing.T) {
		f, code := signIn(t)
		_, _, tr := e.token(codeForm(f, code))
		status, body, tr2 := e.token(refreshForm(f, tr.RefreshToken))
		if status != 200 {
			t.Fatalf("first refresh: %d %s", status, body)
		}
		status, body, _ = e.token(refreshForm(f, tr.RefreshToken))
		want := answer{400, `{"error":"invalid_grant","error_description":"refresh token already used; every token of this grant is revoked"}`}
		if diff := cmp.Diff(want, got(status, body)); diff != "" {
			t.Errorf("reuse (-want +got):\n%s", diff)
		}
		status, body, _ = e.token(refreshForm(f, tr2.RefreshToken))
		want = answer{400, `{"error":"invalid_grant","error_description":"refresh token revoked"}`}
		if diff := cmp.Diff(want, got(status, body)); diff != "" {
			t.Errorf("the rotated token after reuse (-want +got):\n%s", diff)
		}
	})
	t.Run("unknown refresh token", func(t *testing.T) {
		status, body, _ := e.token(refreshForm(first, "nope"))
		want := answer{400, `{"error":"invalid_grant","error_description":"unknown refresh token"}`}
		if diff := cmp.Diff(want, got(status, body)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("client secret", func(t *testing.T) {
		form := refreshForm(first, "x")
		form.Set("client_secret", "s")
		status, body, _ := e.token(form)
		want := answer{401, `{"error":"invalid_client","error_description":"clients of this server are public: authenticate with PKCE, not a secret"}`}
		if diff := cmp.Diff(want, got(status, body)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	// Refusals at /authorize: shown to the user while the client or its
	// redirect URI is not trusted, else sent back to the client.
	page := func(t *testing.T, f *flow, status int, text string) {
		t.Helper()
		res, body, consented := e.authorize(e.browser(redirect), f, true)
		if consented || res.StatusCode != status || !strings.Contains(body, text) || res.Header.Get("Location") != "" {
			t.Errorf("authorize: %d %q (consent %v); want %d with %q", res.StatusCode, body, consented, status, text)
		}
	}
	back := func(t *testing.T, f *flow, code, desc string) {
		t.Helper()
		res, body, _ := e.authorize(e.browser(redirect), f, true)
		loc, _ := url.Parse(res.Header.Get("Location"))
		q := loc.Query()
		if res.StatusCode != 302 || q.Get("error") != code || q.Get("error_description") != desc || q.Get("state") != f.state || q.Get("iss") != e.srv.URL {
			t.Errorf("authorize: %d %s %s; want a redirect with error %s (%s), state and iss", res.StatusCode, loc, body, code, desc)
		}
	}
	t.Run("unknown client", func(t *testing.T) {
		page(t, newFlow("dcr_unknown", redirect, e.endpoint), 400, "<code>invalid_client</code>: unknown client")
	})
	t.Run("redirect URI not registered", func(t *testing.T) {
		page(t, newFlow(id, "http://127.0.0.1:9/elsewhere", e.endpoint), 400, "<code>invalid_request</code>: redirect_uri is not registered for this client")
	})
	t.Run("wrong resource", func(t *testing.T) {
		back(t, newFlow(id, redirect, "https://other.example.com/mcp"), "invalid_target", "resource is not this server")
	})
	t.Run("no PKCE", func(t *testing.T) {
		f := newFlow(id, redirect, e.endpoint)
		res, err := e.browser(redirect).Get(strings.Replace(f.authorizeURL(e.srv.URL), "code_challenge_method=S256", "code_challenge_method=plain", 1))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		loc, _ := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != 302 || loc.Query().Get("error") != "invalid_request" || !strings.Contains(loc.Query().Get("error_description"), "S256") {
			t.Errorf("plain PKCE: %d %s", res.StatusCode, loc)
		}
	})
	t.Run("unsupported scope", func(t *testing.T) {
		f := newFlow(id, redirect, e.endpoint)
		res, err := e.browser(redirect).Get(strings.Replace(f.authorizeURL(e.srv.URL), "scope=openid+mcp+offline_access", "scope=admin", 1))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		loc, _ := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != 302 || loc.Query().Get("error") != "invalid_scope" || loc.Query().Get("error_description") != "scope admin is not supported" {
			t.Errorf("scope=admin: %d %s", res.StatusCode, loc)
		}
	})
}

// TestConsentCSRF: the consent form is accepted only with the CSRF token
// and cookie of the browser that signed in, and only once.
func TestConsentCSRF(t *testing.T) {
	e := newEnv(t, nil)
	redirect := "http://127.0.0.1:9/cb"
	id := e.register(redirect)
	b := e.browser(redirect)
	f := newFlow(id, redirect, e.endpoint)
	res, err := b.Get(f.authorizeURL(e.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	form := url.Values{"decision": {"approve"}}
	for _, m := range hidden.FindAllStringSubmatch(string(raw), -1) {
		form.Set(m[1], m[2])
	}
	if form.Get("csrf") == "" || !strings.Contains(string(raw), "Test &lt;Client&gt;") || !strings.Contains(string(raw), redirect) {
		t.Fatalf("consent page lacks the form, the escaped client name or the redirect URI:\n%s", raw)
	}
	// Another browser (no cookie) posting the same form is refused, and
	// the request is spent.
	res, err = http.PostForm(e.srv.URL+asfront.ConsentPath, form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 403 || !strings.Contains(string(body), "not from this browser") {
		t.Errorf("consent from another browser: %d %s", res.StatusCode, body)
	}
	res, err = b.PostForm(e.srv.URL+asfront.ConsentPath, form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(body), "used or expired consent") {
		t.Errorf("consent replayed: %d %s", res.StatusCode, body)
	}
}

// TestCIMD: an URL client id is its metadata document; the document must
// name itself and is bounded in size.
func TestCIMD(t *testing.T) {
	e := newEnv(t, func(o *asfront.Options) { o.AllowLoopbackClientIDs = true })
	redirect := "http://127.0.0.1:9/cb"
	var docs *httptest.Server
	var goodFetches atomic.Int64
	docs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/good.json":
			goodFetches.Add(1)
			fmt.Fprintf(w, `{"client_id":%q,"client_name":"CIMD app","redirect_uris":[%q]}`, docs.URL+"/good.json", redirect)
		case "/liar.json":
			fmt.Fprintf(w, `{"client_id":"https://victim.example/app.json","redirect_uris":[%q]}`, redirect)
		case "/huge.json":
			fmt.Fprintf(w, `{"client_id":%q,"client_name":%q,"redirect_uris":[%q]}`, docs.URL+"/huge.json", strings.Repeat("x", 6000), redirect)
		default:
			http.NotFound(w, r)
		}
	}))
	defer docs.Close()

	f := newFlow(docs.URL+"/good.json", redirect, e.endpoint)
	res, body, consented := e.authorize(e.browser(redirect), f, true)
	if !consented {
		t.Fatalf("CIMD client: %d %s", res.StatusCode, body)
	}
	if status, body, _ := e.token(codeForm(f, e.code(res, f))); status != 200 {
		t.Errorf("CIMD client token: %d %s", status, body)
	}
	// A second sign-in uses the cached document.
	f2 := newFlow(docs.URL+"/good.json", redirect, e.endpoint)
	res, body, _ = e.authorize(e.browser(redirect), f2, true)
	if res.StatusCode != 302 {
		t.Fatalf("second CIMD sign-in: %d %s", res.StatusCode, body)
	}
	if n := goodFetches.Load(); n != 1 {
		t.Errorf("the metadata document was fetched %d times for two sign-ins; want 1 (cached)", n)
	}
	for _, path := range []string{"/liar.json", "/huge.json", "/missing.json"} {
		res, body, _ := e.authorize(e.browser(redirect), newFlow(docs.URL+path, redirect, e.endpoint), true)
		if res.StatusCode != 400 || !strings.Contains(body, "unknown client") {
			t.Errorf("CIMD %s: %d %s", path, res.StatusCode, body)
		}
	}
	// Without the test option, loopback documents are never fetched.
	e2 := newEnv(t, nil)
	res, body, _ = e2.authorize(e2.browser(redirect), newFlow(docs.URL+"/good.json", redirect, e2.endpoint), true)
	if res.StatusCode != 400 || !strings.Contains(body, "unknown client") {
		t.Errorf("loopback CIMD without the option: %d %s", res.StatusCode, body)
	}
}

// TestRegisterBounds: registration refuses what it cannot trust and stops
// at MaxClients.
func TestRegisterBounds(t *testing.T) {
	e := newEnv(t, func(o *asfront.Options) { o.MaxClients = 2 })
	for _, tc := range []struct{ name, body, want string }{
		{"javascript redirect", `{"redirect_uris":["javascript:alert(1)"]}`, `{"error":"invalid_redirect_uri","error_description":"redirect URI \"javascript:alert(1)\": scheme not allowed"}`},
		{"http on a public host", `{"redirect_uris":["http://example.com/cb"]}`, `{"error":"invalid_redirect_uri","error_description":"redirect URI \"http://example.com/cb\": http only on a loopback host"}`},
		{"no redirect", `{"client_name":"x"}`, `{"error":"invalid_redirect_uri","error_description":"want between 1 and 10 redirect_uris"}`},
		{"implicit grant", `{"redirect_uris":["https://a.example/cb"],"grant_types":["implicit"]}`, `{"error":"invalid_client_metadata","error_description":"grant type \"implicit\" is not supported (authorization_code, refresh_token)"}`},
		{"too large", `{"client_name":"` + strings.Repeat("x", 20000) + `"}`, `{"error":"invalid_client_metadata","error_description":"the registration is larger than 16384 bytes"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.post(asfront.RegisterPath, "application/json", tc.body)
			if status != 400 || body != tc.want {
				t.Errorf("register: %d %s; want 400 %s", status, body, tc.want)
			}
		})
	}
	e.register("https://a.example/cb")
	e.register("cursor://anysphere.cursor-retrieval/oauth/callback")
	status, body := e.post(asfront.RegisterPath, "application/json", `{"redirect_uris":["https://a.example/cb"]}`)
	if status != 503 || body != `{"error":"temporarily_unavailable","error_description":"too many registered clients (max_clients)"}` {
		t.Errorf("third client at max_clients 2: %d %s", status, body)
	}
}

// TestKeyRotation: a token signed before a rotation stays valid, so
// rotating logs nobody out, and new tokens use the new key.
func TestKeyRotation(t *testing.T) {
	e := newEnv(t, func(o *asfront.Options) { o.KeyRotation = time.Hour })
	redirect := "http://127.0.0.1:9/cb"
	id := e.register(redirect)
	f := newFlow(id, redirect, e.endpoint)
	res, _, _ := e.authorize(e.browser(redirect), f, true)
	_, _, tr := e.token(codeForm(f, e.code(res, f)))
	if _, err := e.verify(tr.AccessToken); err != nil {
		t.Fatal(err)
	}
	before := e.keys.JWKS().Keys[0].KeyID
	if err := e.keys.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.verify(tr.AccessToken); err != nil {
		t.Errorf("token signed before the rotation refused: %v", err)
	}
	_, body, tr2 := e.token(refreshForm(f, tr.RefreshToken))
	if _, err := e.verify(tr2.AccessToken); err != nil {
		t.Errorf("token signed after the rotation refused: %v (%s)", err, body)
	}
	if kid := kidOf(t, tr2.AccessToken); kid == before {
		t.Errorf("new token signed with the old key %s", kid)
	}
	// Past KeyRotation the front rotates by itself.
	e.skew.Store(3700)
	defer e.skew.Store(0)
	n := len(e.keys.JWKS().Keys)
	_, body, tr3 := e.token(refreshForm(f, tr2.RefreshToken))
	if len(e.keys.JWKS().Keys) != n+1 {
		t.Errorf("no rotation after KeyRotation: %d keys, had %d (%s)", len(e.keys.JWKS().Keys), n, body)
	}
	if _, err := e.verify(tr3.AccessToken); err != nil {
		t.Errorf("token after the automatic rotation refused: %v", err)
	}
}

func kidOf(t *testing.T, jwt string) string {
	t.Helper()
	h, _, _ := strings.Cut(jwt, ".")
	raw, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct {
		Kid string `json:"kid"`
	}
	_ = json.Unmarshal(raw, &hdr)
	return hdr.Kid
}

// TestMetadata: the RFC 8414 document names every endpoint under the
// issuer and what the front supports.
func TestMetadata(t *testing.T) {
	e := newEnv(t, nil)
	res, err := http.Get(e.srv.URL + asfront.MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	u := e.srv.URL
	want := map[string]any{
		"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
		"registration_endpoint": u + "/register", "jwks_uri": u + "/jwks",
		"scopes_supported": []any{"mcp"}, "response_types_supported": []any{"code"}, "response_modes_supported": []any{"query"},
		"grant_types_supported":                 []any{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported": []any{"none"}, "code_challenge_methods_supported": []any{"S256"},
		"revocation_endpoint": u + "/revoke", "revocation_endpoint_auth_methods_supported": []any{"none"},
		"authorization_response_iss_parameter_supported": true, "client_id_metadata_document_supported": true,
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
}

// BenchmarkRefresh is one refresh-token rotation at the token endpoint
// (file store, ES256 signing) and a check of the new access token by the
// resource server (keys cached): a client's cost every AccessTokenTTL.
func BenchmarkRefresh(b *testing.B) {
	e := newEnv(b, nil)
	redirect := "http://127.0.0.1:9/cb"
	id := e.register(redirect)
	f := newFlow(id, redirect, e.endpoint)
	res, _, _ := e.authorize(e.browser(redirect), f, true)
	_, _, tr := e.token(codeForm(f, e.code(res, f)))
	b.ReportAllocs()
	for b.Loop() {
		status, body, next := e.token(refreshForm(f, tr.RefreshToken))
		if status != 200 {
			b.Fatalf("refresh: %d %s", status, body)
		}
		if _, err := e.verify(next.AccessToken); err != nil {
			b.Fatal(err)
		}
		tr = next
	}
}
