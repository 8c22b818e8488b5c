package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/google/go-cmp/cmp"
)

// urlAttrRE finds every attribute of a page that names a console URL:
// links, forms, scripts, styles, htmx posts and the URLs the scripts use.
var urlAttrRE = regexp.MustCompile(`\s(href|src|action|formaction|hx-post|data-poll|data-events|data-calls)="([^"]*)"`)

// TestPrefix: every path a page names (links, forms, static assets, the
// event stream, htmx and the scripts' URLs) is under Prefix, so a serve
// can mount the console beside /mcp; the old root-level paths are not
// the console's; a standalone console leads / to it.
func TestPrefix(t *testing.T) {
	f := newFixture(t, tokensConfig, false)
	f.record(t, rec("bash", "ops", "ok", `{"command":"ls"}`))
	f.waitRows(t, 1)
	for _, path := range []string{"/console/calls", "/console/calls/1", "/console/approvals", "/console/charts", "/console/sessions", "/console/sessions?profile=default", "/console/tools", "/console/upstreams", "/console/login"} {
		res, body := f.get(t, path, adminToken)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", path, res.StatusCode)
			continue
		}
		n := 0
		for _, m := range urlAttrRE.FindAllStringSubmatch(body, -1) {
			if m[2] == "data:," || strings.HasPrefix(m[2], "#") { // the empty favicon, the skip link
				continue
			}
			n++
			u, err := url.Parse(strings.ReplaceAll(m[2], "&amp;", "&"))
			if err != nil || u.Host != "" || !strings.HasPrefix(u.Path, Prefix+"/") {
				t.Errorf("GET %s: %s=%q is not under %s/", path, m[1], m[2], Prefix)
				continue
			}
			if m[1] == "src" || (m[1] == "href" && strings.Contains(u.Path, "/static/")) {
				if res, _ := f.get(t, u.Path, ""); res.StatusCode != http.StatusOK {
					t.Errorf("GET %s: its %s %s answers %d", path, m[1], u.Path, res.StatusCode)
				}
			}
		}
		if n == 0 {
			t.Errorf("GET %s: no URL found; is urlAttrRE stale?", path)
		}
	}
	// What the console answered at the root before is not its own now.
	for _, path := range []string{"/", "/calls", "/login", "/static/htmx.min.js", "/approvals/list", "/mcp"} {
		if res, _ := f.get(t, path, adminToken); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s on a mounted console: status %d; want 404", path, res.StatusCode)
		}
	}
	for _, path := range []string{"/console", "/console/"} {
		if res, _ := f.get(t, path, ""); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/calls" {
			t.Errorf("GET %s: %d → %q; want 303 → /console/calls", path, res.StatusCode, res.Header.Get("Location"))
		}
	}
	// Without a login a page leads to the login page, under the prefix,
	// and back to the page; its parts are refused.
	if res, _ := f.get(t, "/console/charts", ""); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/login?next=%2Fconsole%2Fcharts" {
		t.Errorf("GET /console/charts without a login: %d → %q; want the login page", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := f.get(t, "/console/approvals/list", ""); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /console/approvals/list without a login: %d; want 401", res.StatusCode)
	}
	// The login cookie is for the console's paths only, and a login
	// leads only to a console page.
	_, page := f.get(t, "/console/login", "")
	csrf := csrfRE.FindStringSubmatch(page)
	if csrf == nil {
		t.Fatal("login page without CSRF token")
	}
	for _, tc := range []struct{ next, want string }{
		{"/console/tools", "/console/tools"},
		{"/mcp", "/console/calls"},
		{"//evil.example/console/", "/console/calls"},
		{"/console/../mcp", "/console/calls"},
		{"/console//evil.example", "/console/calls"},
		{"https://evil.example/console/calls", "/console/calls"},
	} {
		res, err := noRedirect.PostForm(f.srv.URL+"/console/login", url.Values{"token": {adminToken}, "csrf": {csrf[1]}, "next": {tc.next}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("Location"); got != tc.want {
			t.Errorf("login with next=%q → %q; want %q", tc.next, got, tc.want)
		}
		var paths []string
		for _, c := range res.Cookies() {
			paths = append(paths, c.Path)
		}
		if diff := cmp.Diff([]string{"/console/"}, paths); diff != "" {
			t.Errorf("login cookie paths (-want +got):\n%s", diff)
		}
	}
	// A decision's answer leads back under the prefix.
	_, page = f.get(t, "/console/approvals", adminToken)
	csrf = csrfRE.FindStringSubmatch(page)
	req, _ := http.NewRequest("POST", f.srv.URL+"/console/approvals/"+strings.Repeat("a", 26), strings.NewReader(url.Values{"decision": {"approve"}, "csrf": {csrf[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("Location"); got != "/console/approvals?done=gone" {
		t.Errorf("decision on an unknown call → %q; want /console/approvals?done=gone", got)
	}
}

// TestStandaloneRoot: bub-mcp console has its listener to itself, so /
// leads to the console's pages.
func TestStandaloneRoot(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	f.c.o.Standalone = true
	f.c.routes()
	f.srv = httptest.NewServer(f.c.Handler())
	t.Cleanup(f.srv.Close)
	res, _ := f.get(t, "/", "")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/calls" {
		t.Errorf("GET / on a standalone console: %d → %q; want 303 → /console/calls", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := f.get(t, "/calls", ""); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /calls on a standalone console: %d; want 404 (its pages are under %s)", res.StatusCode, Prefix)
	}
}

// TestWhoOf: an OAuth principal (issuer#sub) is shown as its subject at
// its issuer's host; anything else (a token's name) as it is.
func TestWhoOf(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want Who
	}{
		{"https://idp.example.com/realms/x#alice", Who{ID: "https://idp.example.com/realms/x#alice", Issuer: "https://idp.example.com/realms/x", Subject: "alice", Host: "idp.example.com"}},
		{"http://127.0.0.1:4444#a#b", Who{ID: "http://127.0.0.1:4444#a#b", Issuer: "http://127.0.0.1:4444", Subject: "a#b", Host: "127.0.0.1:4444"}},
		{"ops", Who{ID: "ops"}},
		{"team#1", Who{ID: "team#1"}},
		{"https://idp.example.com#", Who{ID: "https://idp.example.com#"}},
		{"", Who{}},
	} {
		if diff := cmp.Diff(tc.want, whoOf(tc.id)); diff != "" {
			t.Errorf("whoOf(%q) (-want +got):\n%s", tc.id, diff)
		}
	}
}

// TestOAuthIsAuth: OAuth principals with a console rule are someone who
// can log in, so a console beyond loopback may run on them alone; and
// with them configured a loopback console has no anonymous local admin.
func TestOAuthIsAuth(t *testing.T) {
	rs, err := auth.NewResourceServer(auth.Options{Issuer: "https://idp.example.com", PublicURL: "https://mcp.example.com",
		Rules: []auth.Rule{{Claim: "groups", Value: "ops", Profile: "default"}}})
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	cfg, err := config.Parse("bub.toml", strings.ReplaceAll(plainConfig, "WS", ws), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Home: t.TempDir(), Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, loopback := range []bool{false, true} {
		c, err := New(Options{App: a, Loopback: loopback, OAuth: rs})
		if err != nil {
			t.Fatalf("New (loopback %v) with OAuth and no token: %v", loopback, err)
		}
		srv := httptest.NewServer(c.Handler())
		res, err := noRedirect.Get(srv.URL + "/console/approvals/list")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("loopback %v: GET /console/approvals/list without a token = %d; want 401", loopback, res.StatusCode)
		}
		srv.Close()
		c.Close()
	}
}

// An OAuth principal recorded with a name (name_claim) is shown by that
// name, issuer#sub on hover; the call's page shows both.
func TestPrincipalName(t *testing.T) {
	f := newFixture(t, tokensConfig, true)
	r := rec("fs.read", "https://idp.example.com#u-123", "ok", `{"path":"a"}`)
	r.PrincipalName = "alice@example.com"
	f.record(t, r)
	f.waitRows(t, 1)
	_, page := f.get(t, "/console/calls", adminToken)
	if want := `<span class="principal" title="https://idp.example.com#u-123">alice@example.com</span>`; !strings.Contains(page, want) {
		t.Errorf("calls page lacks %s", want)
	}
	seq := f.c.feed.recent(&Filter{}, 1)[0].Seq
	_, detail := f.get(t, fmt.Sprintf("/console/calls/%d", seq), adminToken)
	if !strings.Contains(detail, "<dt>Name</dt><dd>alice@example.com</dd>") || !strings.Contains(detail, "https://idp.example.com#u-123") {
		t.Errorf("call page lacks the name and the principal:\n%s", detail)
	}
}
