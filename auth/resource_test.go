package auth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/bubbuild/bub-mcp/auth"
)

const public = "https://mcp.example.com"

// clock is a fake clock the tests advance by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_900_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var testRules = []auth.Rule{
	{Claim: "groups", Value: "eng", Profile: "dev"},
	{Claim: "email", Value: "@example.com", Profile: "staff"},
	{Claim: "scope", Value: "admin", Profile: "ops"},
	{Claim: "realm_access.roles", Value: "auditor", Profile: "audit"},
}

func newRS(t testing.TB, o auth.Options) *auth.ResourceServer {
	t.Helper()
	if o.PublicURL == "" {
		o.PublicURL = public
	}
	rs, err := auth.NewResourceServer(o)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// serve is rs in front of a handler that echoes the principal, as
// streamhttp mounts it (metadata without a token, then Authenticate), on
// a real loopback HTTP server.
func serve(t testing.TB, rs *auth.ResourceServer) *httptest.Server {
	t.Helper()
	meta := rs.MetadataHandler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, auth.WellKnownPath) {
			meta.ServeHTTP(w, r)
			return
		}
		p, err := rs.Authenticate(r.Context(), r)
		if err != nil {
			rs.WriteError(w, r, err)
			return
		}
		_ = json.NewEncoder(w).Encode(p)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

type reply struct {
	status int
	www    string
	body   string
	p      *auth.Principal
}

func call(t testing.TB, srv *httptest.Server, path, token string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("{}"))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, www: resp.Header.Get("WWW-Authenticate"), body: string(b)}
	if resp.StatusCode == 200 {
		r.p = &auth.Principal{}
		if err := json.Unmarshal(b, r.p); err != nil {
			t.Fatalf("principal: %v: %s", err, b)
		}
	}
	return r
}

// TestRefusals: each bad token is refused with its status and challenge;
// the forged ones come from a local issuer whose keys the test holds.
func TestRefusals(t *testing.T) {
	idp := newFakeIdP(t)
	clk := newClock()
	now := clk.Now()
	rs := newRS(t, auth.Options{Issuer: idp.issuer(), RequiredScopes: []string{"mcp"}, Rules: testRules, Now: clk.Now})
	srv := serve(t, rs)
	k := idp.current()
	good := map[string]any{
		"iss": idp.issuer(), "sub": "alice", "aud": public + "/mcp", "scope": "openid mcp",
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix(),
		"groups": []string{"eng"}, "email": "alice@example.com",
	}
	other := signingKey{kid: "k1", alg: jose.RS256, key: idp.add(t, "spare", jose.RS256).key} // right kid, wrong key
	const meta = `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp"`
	invalid := func(desc string) string {
		return meta + `, error="invalid_token", error_description="` + desc + `"`
	}
	tests := []struct {
		name, path, token string
		status            int
		www               string
		errCode           string
	}{
		{"no token", "/mcp", "", 401, meta, "unauthorized"},
		{"not a bearer", "/mcp", "", 401, meta, "unauthorized"},
		{"expired", "/mcp", mint(t, k, withClaims(good, map[string]any{"exp": now.Add(-61 * time.Second).Unix()})), 401, invalid("token expired"), "invalid_token"},
		{"not yet valid", "/mcp", mint(t, k, withClaims(good, map[string]any{"nbf": now.Add(2 * time.Minute).Unix()})), 401, invalid("token not yet valid"), "invalid_token"},
		{"no expiry", "/mcp", mint(t, k, withClaims(good, map[string]any{"exp": nil})), 401, invalid("token has no valid expiry"), "invalid_token"},
		{"wrong audience", "/mcp", mint(t, k, withClaims(good, map[string]any{"aud": "https://other.example.com/mcp"})), 401, invalid("token is for another resource"), "invalid_token"},
		{"no audience", "/mcp", mint(t, k, withClaims(good, map[string]any{"aud": nil})), 401, invalid("token is for another resource"), "invalid_token"},
		{"wrong issuer", "/mcp", mint(t, k, withClaims(good, map[string]any{"iss": "https://evil.example.com"})), 401, invalid("token from another issuer"), "invalid_token"},
		{"unknown key id", "/mcp", mint(t, signingKey{kid: "nope", alg: jose.RS256, key: other.key}, good), 401, invalid("unknown signing key"), "invalid_token"},
		{"bad signature", "/mcp", mint(t, other, good), 401, invalid("invalid signature"), "invalid_token"},
		{"alg none", "/mcp", unsigned("k1", good), 401, invalid("malformed or unsupported token"), "invalid_token"},
		{"HS256 with the public key", "/mcp", hs256WithPublicKey(t, k, good), 401, invalid("malformed or unsupported token"), "invalid_token"},
		{"opaque without introspection", "/mcp", "ory_at_abc.def", 401, invalid("unsupported token format"), "invalid_token"},
		{"missing scope", "/mcp", mint(t, k, withClaims(good, map[string]any{"scope": "openid"})), 403,
			meta + `, error="insufficient_scope", error_description="the token lacks a required scope"`, "insufficient_scope"},
		{"profile not allowed", "/mcp/p/ops", mint(t, k, good), 403, "", "access_denied"},
		{"profile not allowed, older path form", "/p/ops/mcp", mint(t, k, good), 403, "", "access_denied"},
		{"no rule matches", "/mcp", mint(t, k, withClaims(good, map[string]any{"groups": []string{"sales"}, "email": "a@other.org"})), 403, "", "access_denied"},
		{"email domain, unverified", "/mcp/p/staff", mint(t, k, withClaims(good, map[string]any{"email_verified": false})), 403, "", "access_denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := tt.token
			got := call(t, srv, tt.path, token)
			if tt.name == "not a bearer" {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+tt.path, nil)
				req.Header.Set("Authorization", "Basic YWxpY2U6cHc=")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got = reply{status: resp.StatusCode, www: resp.Header.Get("WWW-Authenticate"), body: string(b)}
				tt.www = invalid("malformed Authorization header")
				tt.errCode = "invalid_token"
			}
			if got.status != tt.status {
				t.Errorf("status = %d; want %d (body %s)", got.status, tt.status, got.body)
			}
			if got.www != tt.www {
				t.Errorf("WWW-Authenticate:\n got %s\nwant %s", got.www, tt.www)
			}
			var body struct{ Error string }
			_ = json.Unmarshal([]byte(got.body), &body)
			if body.Error != tt.errCode {
				t.Errorf("body error = %q; want %q", body.Error, tt.errCode)
			}
			if strings.Contains(got.body, "eng") || strings.Contains(got.body, "ops") || strings.Contains(got.body, "example.com") {
				t.Errorf("refusal body leaks claims or rules: %s", got.body)
			}
		})
	}
}

// TestPrincipal: a good token yields the principal, and the rules pick the
// profiles (first match is the default; a profile path must be allowed).
func TestPrincipal(t *testing.T) {
	idp := newFakeIdP(t)
	clk := newClock()
	now := clk.Now()
	rs := newRS(t, auth.Options{Issuer: idp.issuer(), RequiredScopes: []string{"mcp"}, Rules: testRules, NameClaim: "email", Now: clk.Now})
	srv := serve(t, rs)
	k := idp.current()
	base := map[string]any{
		"iss": idp.issuer(), "sub": "alice", "aud": []string{public + "/mcp"}, "scope": "mcp",
		"exp": now.Add(time.Hour).Unix(), "client_id": "claude",
	}
	exp := time.Unix(now.Add(time.Hour).Unix(), 0)
	tests := []struct {
		name   string
		path   string
		claims map[string]any
		want   auth.Principal
	}{
		{"groups array", "/mcp", withClaims(base, map[string]any{"groups": []string{"x", "eng"}, "email": "alice@corp.org"}),
			auth.Principal{Name: "alice@corp.org", Profiles: []string{"dev"}, Profile: "dev", Scopes: []string{"mcp"}}},
		{"email domain", "/mcp", withClaims(base, map[string]any{"email": "Bob@EXAMPLE.com", "email_verified": true}),
			auth.Principal{Name: "Bob@EXAMPLE.com", Profiles: []string{"staff"}, Profile: "staff", Scopes: []string{"mcp"}}},
		{"scope rule, scp array", "/mcp", withClaims(base, map[string]any{"scope": nil, "scp": []string{"mcp", "admin"}}),
			auth.Principal{Name: "alice", Profiles: []string{"ops"}, Profile: "ops", Scopes: []string{"mcp", "admin"}}},
		{"nested claim", "/mcp", withClaims(base, map[string]any{"realm_access": map[string]any{"roles": []string{"auditor"}}}),
			auth.Principal{Name: "alice", Profiles: []string{"audit"}, Profile: "audit", Scopes: []string{"mcp"}}},
		{"first match is the default", "/mcp", withClaims(base, map[string]any{"groups": "eng", "email": "a@example.com"}),
			auth.Principal{Name: "a@example.com", Profiles: []string{"dev", "staff"}, Profile: "dev", Scopes: []string{"mcp"}}},
		{"profile path, second match", "/mcp/p/staff", withClaims(base, map[string]any{"groups": "eng", "email": "a@example.com", "aud": public + "/mcp/p/staff"}),
			auth.Principal{Name: "a@example.com", Profiles: []string{"dev", "staff"}, Profile: "staff", Scopes: []string{"mcp"}}},
		{"older profile path form", "/p/staff/mcp", withClaims(base, map[string]any{"groups": "eng", "email": "a@example.com", "aud": public + "/p/staff/mcp"}),
			auth.Principal{Name: "a@example.com", Profiles: []string{"dev", "staff"}, Profile: "staff", Scopes: []string{"mcp"}}},
		{"endpoint token on a profile path", "/mcp/p/dev", withClaims(base, map[string]any{"groups": "eng"}),
			auth.Principal{Name: "alice", Profiles: []string{"dev"}, Profile: "dev", Scopes: []string{"mcp"}}},
		{"audience with trailing slash", "/mcp", withClaims(base, map[string]any{"groups": "eng", "aud": "https://MCP.example.com:443/mcp/"}),
			auth.Principal{Name: "alice", Profiles: []string{"dev"}, Profile: "dev", Scopes: []string{"mcp"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := call(t, srv, tt.path, mint(t, k, tt.claims))
			if got.status != 200 {
				t.Fatalf("status %d: %s", got.status, got.body)
			}
			want := tt.want
			want.Issuer, want.Subject, want.ClientID, want.Expiry = idp.issuer(), "alice", "claude", exp
			if d := cmp.Diff(&want, got.p); d != "" {
				t.Errorf("principal (-want +got):\n%s", d)
			}
		})
	}
	if got, want := (&auth.Principal{Issuer: "https://idp", Subject: "u1"}).ID(), "https://idp#u1"; got != want {
		t.Errorf("ID() = %q; want %q", got, want)
	}
}

// TestKeyRotation: after the issuer rotates its keys, a token with the new
// kid is accepted once the JWKS is fetched again, and fetches for unknown
// kids are rate-limited.
func TestKeyRotation(t *testing.T) {
	idp := newFakeIdP(t)
	clk := newClock()
	rs := newRS(t, auth.Options{Issuer: idp.issuer(), Now: clk.Now, MinRefetchInterval: 30 * time.Second})
	srv := serve(t, rs)
	claims := func() map[string]any {
		return map[string]any{"iss": idp.issuer(), "sub": "alice", "aud": public + "/mcp", "exp": clk.Now().Add(time.Hour).Unix()}
	}
	step := func(name string, token string, wantStatus int, wantFetches int64) {
		t.Helper()
		got := call(t, srv, "/mcp", token)
		if got.status != wantStatus || idp.fetches.Load() != wantFetches {
			t.Errorf("%s: status %d, JWKS fetches %d; want %d, %d (%s)", name, got.status, idp.fetches.Load(), wantStatus, wantFetches, got.body)
		}
	}
	old := idp.current()
	step("first token fetches the keys", mint(t, old, claims()), 200, 1)
	step("cached keys", mint(t, old, claims()), 200, 1)
	clk.Advance(40 * time.Second)
	idp.rotate(t, "k2")
	step("new kid: refetch", mint(t, idp.current(), claims()), 200, 2)
	step("old kid is gone, but within the refetch interval", mint(t, old, claims()), 401, 2)
	for i := range 20 {
		step("made-up kid, rate-limited", mint(t, signingKey{kid: "x" + string(rune('a'+i)), alg: jose.RS256, key: old.key}, claims()), 401, 2)
	}
	clk.Advance(31 * time.Second)
	step("after the interval one refetch", mint(t, signingKey{kid: "y", alg: jose.RS256, key: old.key}, claims()), 401, 3)
	clk.Advance(2 * time.Hour)
	step("stale keys are refreshed", mint(t, idp.current(), claims()), 200, 4)
}

// TestVerifiedTokenCache: a token whose signature checked out is not
// checked again on its next requests, but its expiry still is, and a key
// the issuer has dropped stops it once the keys are refreshed, as it
// would stop an uncached check.
func TestVerifiedTokenCache(t *testing.T) {
	idp := newFakeIdP(t)
	clk := newClock()
	rs := newRS(t, auth.Options{Issuer: idp.issuer(), Now: clk.Now, KeyRefreshInterval: 10 * time.Minute, MinRefetchInterval: time.Second})
	srv := serve(t, rs)
	mintFor := func(k signingKey, ttl time.Duration) string {
		return mint(t, k, map[string]any{"iss": idp.issuer(), "sub": "alice", "aud": public + "/mcp", "exp": clk.Now().Add(ttl).Unix()})
	}
	step := func(name, token string, wantStatus int) {
		t.Helper()
		if got := call(t, srv, "/mcp", token); got.status != wantStatus {
			t.Errorf("%s: status %d; want %d (%s)", name, got.status, wantStatus, got.body)
		}
	}
	long, short := mintFor(idp.current(), time.Hour), mintFor(idp.current(), 5*time.Minute)
	step("long: first", long, 200)
	step("short: first", short, 200)
	step("long: again, cached", long, 200)
	if f := idp.fetches.Load(); f != 1 {
		t.Errorf("%d JWKS fetches; want 1", f)
	}
	clk.Advance(6 * time.Minute)
	step("short: expired while cached", short, 401)
	step("long: still cached", long, 200)
	idp.rotate(t, "k2")
	clk.Advance(5 * time.Minute) // the keys are stale: the next check refreshes them
	step("long: its key is gone from the issuer", long, 401)
	step("a token with the new key", mintFor(idp.current(), time.Hour), 200)
}

// TestIntrospection: opaque tokens are checked at an RFC 7662 endpoint with
// the resource server's credentials; inactive ones are refused.
func TestIntrospection(t *testing.T) {
	idp := newFakeIdP(t)
	clk := newClock()
	var gotAuth []string
	var mu sync.Mutex
	intro := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		mu.Lock()
		gotAuth = append(gotAuth, id+":"+secret)
		mu.Unlock()
		_ = r.ParseForm()
		switch r.PostForm.Get("token") {
		case "opaque-good":
			_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "iss": idp.issuer(), "sub": "bob",
				"aud": []string{public + "/mcp"}, "scope": "mcp", "exp": clk.Now().Add(time.Hour).Unix(), "client_id": "c1"})
		case "opaque-other-aud":
			_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "iss": idp.issuer(), "sub": "bob",
				"aud": "https://other.example.com", "scope": "mcp", "exp": clk.Now().Add(time.Hour).Unix()})
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"active": false})
		}
	}))
	t.Cleanup(intro.Close)
	rs := newRS(t, auth.Options{Issuer: idp.issuer(), RequiredScopes: []string{"mcp"}, Now: clk.Now,
		Introspection: &auth.Introspection{URL: intro.URL, ClientID: "rs", ClientSecret: "s3cret"}})
	srv := serve(t, rs)
	tests := []struct {
		token  string
		status int
		sub    string
	}{
		{"opaque-good", 200, "bob"},
		{"opaque-revoked", 401, ""},
		{"opaque-other-aud", 401, ""},
	}
	for _, tt := range tests {
		got := call(t, srv, "/mcp", tt.token)
		if got.status != tt.status || (got.p != nil && got.p.Subject != tt.sub) {
			t.Errorf("%s: status %d principal %+v; want %d %q (%s)", tt.token, got.status, got.p, tt.status, tt.sub, got.body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gotAuth) != 3 || gotAuth[0] != "rs:s3cret" {
		t.Errorf("introspection credentials = %v; want rs:s3cret on each of 3 calls", gotAuth)
	}
}

// TestMetadata: RFC 9728 documents at the root and path-suffixed URLs, with
// the resource canonicalised as clients compare it.
func TestMetadata(t *testing.T) {
	tests := []struct {
		publicURL, path string
		status          int
		resource        string
	}{
		{"https://MCP.example.com:443", "/.well-known/oauth-protected-resource", 200, "https://mcp.example.com/"},
		{"https://mcp.example.com/", "/.well-known/oauth-protected-resource/mcp", 200, "https://mcp.example.com/mcp"},
		{"https://mcp.example.com", "/.well-known/oauth-protected-resource/mcp/p/dev", 200, "https://mcp.example.com/mcp/p/dev"},
		{"https://mcp.example.com", "/.well-known/oauth-protected-resource/mcp/p/../x", 404, ""},
		{"https://mcp.example.com", "/.well-known/oauth-protected-resource/other", 404, ""},
		{"https://mcp.example.com", "/.well-known/oauth-protected-resource/p/dev/mcp", 200, "https://mcp.example.com/p/dev/mcp"},
		{"https://example.com/bub/", "/.well-known/oauth-protected-resource/bub/mcp", 200, "https://example.com/bub/mcp"},
		{"https://example.com/bub", "/.well-known/oauth-protected-resource/bub", 200, "https://example.com/bub"},
		{"http://127.0.0.1:8080", "/.well-known/oauth-protected-resource/mcp", 200, "http://127.0.0.1:8080/mcp"},
	}
	for _, tt := range tests {
		t.Run(tt.publicURL+tt.path, func(t *testing.T) {
			rs := newRS(t, auth.Options{Issuer: "https://idp.example.com", PublicURL: tt.publicURL, RequiredScopes: []string{"mcp"}})
			rec := httptest.NewRecorder()
			rs.MetadataHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != tt.status {
				t.Fatalf("status %d; want %d", rec.Code, tt.status)
			}
			if tt.status != 200 {
				return
			}
			var doc map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"resource": tt.resource, "authorization_servers": []any{"https://idp.example.com"},
				"scopes_supported": []any{"mcp"}, "bearer_methods_supported": []any{"header"}}
			if d := cmp.Diff(want, doc); d != "" {
				t.Errorf("metadata (-want +got):\n%s", d)
			}
		})
	}
}

func TestNewResourceServerErrors(t *testing.T) {
	tests := []struct {
		name string
		o    auth.Options
		want string
	}{
		{"no issuer", auth.Options{PublicURL: public}, "auth: issuer is required"},
		{"no public url", auth.Options{Issuer: "https://idp"}, "auth: public_url is required"},
		{"plain http", auth.Options{Issuer: "https://idp", PublicURL: "http://mcp.example.com"}, "public_url \"http://mcp.example.com\": must be https"},
		{"query", auth.Options{Issuer: "https://idp", PublicURL: "https://mcp.example.com/?a=1"}, "must not have a query"},
		{"bad rule", auth.Options{Issuer: "https://idp", PublicURL: public, Rules: []auth.Rule{{Claim: "groups", Profile: "dev"}}}, "auth: rules[0]: value is empty"},
		{"bad scope", auth.Options{Issuer: "https://idp", PublicURL: public, RequiredScopes: []string{"a b"}}, "required_scopes"},
		{"skew", auth.Options{Issuer: "https://idp", PublicURL: public, ClockSkew: time.Hour}, "clock_skew"},
	}
	for _, tt := range tests {
		_, err := auth.NewResourceServer(tt.o)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v; want it to contain %q", tt.name, err, tt.want)
		}
	}
}

// BenchmarkVerify is the per-request cost of a JWT check with cached
// keys: a client's repeated token (its signature verified once), and a
// token on its first request (fresh: a new token every iteration, minted
// outside the timer).
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256} {
		b.Run(string(alg)+"/fresh", func(b *testing.B) {
			idp := newFakeIdP(b)
			k := idp.add(b, "bench", alg)
			rs := newRS(b, auth.Options{Issuer: idp.issuer(), RequiredScopes: []string{"mcp"}, Rules: testRules})
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				token := mint(b, k, map[string]any{"iss": idp.issuer(), "sub": "alice", "aud": public + "/mcp", "scope": "mcp",
					"exp": time.Now().Add(time.Hour).Unix(), "groups": []string{"eng"}, "jti": strconv.Itoa(i)})
				req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
				req.Header.Set("Authorization", "Bearer "+token)
				b.StartTimer()
				if _, err := rs.Authenticate(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(alg)+"/repeated", func(b *testing.B) {
			idp := newFakeIdP(b)
			k := idp.add(b, "bench", alg)
			rs := newRS(b, auth.Options{Issuer: idp.issuer(), RequiredScopes: []string{"mcp"}, Rules: testRules})
			token := mint(b, k, map[string]any{"iss": idp.issuer(), "sub": "alice", "aud": public + "/mcp", "scope": "mcp",
				"exp": time.Now().Add(time.Hour).Unix(), "groups": []string{"eng"}})
			req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			if _, err := rs.Authenticate(b.Context(), req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rs.Authenticate(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
