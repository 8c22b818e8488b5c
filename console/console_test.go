package console

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/confirm"
	"github.com/google/go-cmp/cmp"
)

const (
	adminToken = "admin-secret-token"
	userToken  = "alice-secret-token"
)

type fixture struct {
	home string
	c    *Console
	srv  *httptest.Server
	log  *audit.Log
	q    *confirm.FileQueue
}

// newFixture builds an App over a temporary $BUB_HOME with the config
// src (%s is the workspace) and a console over it.
func newFixture(t *testing.T, src string, loopback bool) *fixture {
	t.Helper()
	return newFixtureIn(t, t.TempDir(), src, loopback)
}

// newFixtureIn is newFixture over a given $BUB_HOME.
func newFixtureIn(t testing.TB, home, src string, loopback bool) *fixture {
	t.Helper()
	ws := t.TempDir()
	cfg, err := config.Parse("bub.toml", strings.ReplaceAll(src, "WS", ws), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Home: home, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	c, err := New(Options{App: a, Loopback: loopback, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	l, err := audit.Open(audit.Options{Dir: filepath.Join(home, "audit"), CommitInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &fixture{home: home, c: c, srv: srv, log: l, q: confirm.NewFileQueue(filepath.Join(home, "approvals"))}
}

const plainConfig = "[profiles.default]\nworkspace = \"WS\"\n"

var tokensConfig = fmt.Sprintf(`[profiles.default]
workspace = "WS"
[profiles.other]
workspace = "WS"
[[console.tokens]]
name = "ops"
sha256 = %q
[[auth.tokens]]
name = "alice"
sha256 = %q
profile = "other"
`, config.HashToken(adminToken), config.HashToken(userToken))

func (f *fixture) get(t *testing.T, path, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (f *fixture) record(t *testing.T, recs ...audit.Record) {
	t.Helper()
	for _, r := range recs {
		f.log.Record(r)
	}
	if err := f.log.Flush(); err != nil {
		t.Fatal(err)
	}
}

func rec(tool, principal, outcome string, args string) audit.Record {
	return audit.Record{Time: time.Now(), Principal: principal, Profile: "default", Client: "Claude Desktop/1.0", Transport: "http", Tool: tool, Args: json.RawMessage(args), Outcome: outcome, Duration: 3 * time.Millisecond}
}

// waitRows waits until the ring holds n calls.
func (f *fixture) waitRows(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if len(f.c.feed.recent(&Filter{}, n+1)) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the console did not see %d calls", n)
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	for _, path := range []string{"/console/calls", "/console/approvals", "/console/charts", "/console/sessions", "/console/tools", "/console/upstreams", "/console/static/console.css"} {
		res, _ := f.get(t, path, "")
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", path, res.StatusCode)
		}
		csp := res.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q; want script-src 'self', frame-ancestors 'none', nothing unsafe", path, csp)
		}
		if got := res.Header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q; want DENY", path, got)
		}
	}
}

// TestNoInlineCode: the CSP forbids inline scripts and styles, so the
// pages must have none.
func TestNoInlineCode(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	inline := regexp.MustCompile(`<script>|<script [^>]*>[^<]|<style|style="|\son[a-z]+="`)
	for _, path := range []string{"/console/calls", "/console/approvals", "/console/charts", "/console/sessions", "/console/tools", "/console/upstreams"} {
		_, body := f.get(t, path, "")
		if m := inline.FindString(body); m != "" {
			t.Errorf("GET %s has inline code %q", path, m)
		}
	}
}

func TestHostCheck(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1", "", 200},
		{"localhost:7777", "http://localhost:7777", 200},
		{"evil.example", "", 403},
		{"127.0.0.1", "http://evil.example", 403},
	} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/console/calls", nil)
		req.Host = tc.host
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("Host %q Origin %q: status %d; want %d", tc.host, tc.origin, res.StatusCode, tc.want)
		}
	}
}

func TestNonLoopbackNeedsAdminToken(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		src  string
		want error
	}{
		{plainConfig, ErrNeedsAuth},
		// A token that is not an admin's cannot run the console alone.
		{fmt.Sprintf("[profiles.default]\nworkspace = \"WS\"\n[[auth.tokens]]\nname = \"bob\"\nsha256 = %q\n", config.HashToken("x")), ErrNeedsAuth},
		{fmt.Sprintf("[profiles.default]\nworkspace = \"WS\"\n[[auth.tokens]]\nname = \"bob\"\nadmin = true\nsha256 = %q\n", config.HashToken("x")), nil},
		{tokensConfig, nil},
	} {
		cfg, err := config.Parse("bub.toml", strings.ReplaceAll(tc.src, "WS", ws), nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(t.Context(), &app.Options{Config: cfg, Home: home, Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{App: a, Loopback: false})
		if !errors.Is(err, tc.want) {
			t.Errorf("New beyond loopback with\n%s\n= %v; want %v", tc.src, err, tc.want)
		}
		if c != nil {
			c.Close()
		}
		a.Close()
	}
}

func TestAuth(t *testing.T) {
	f := newFixture(t, tokensConfig, false)
	f.record(t, rec("bash", "alice", "ok", `{"command":"ls"}`), rec("fs.read", "bob", "ok", `{"path":"secret-of-bob"}`))
	f.waitRows(t, 2)
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/console/calls", "", http.StatusSeeOther}, // to the login page
		{"/console/calls/events", "", http.StatusUnauthorized},
		{"/console/calls", "wrong", http.StatusUnauthorized},
		{"/console/calls", adminToken, http.StatusOK},
		{"/console/upstreams", adminToken, http.StatusOK},
		{"/console/sessions", adminToken, http.StatusOK},
		{"/console/calls", userToken, http.StatusOK},
		{"/console/upstreams", userToken, http.StatusForbidden},
		{"/console/sessions", userToken, http.StatusForbidden},
		{"/console/login", "", http.StatusOK},
		{"/console/static/htmx.min.js", "", http.StatusOK},
	} {
		res, _ := f.get(t, tc.path, tc.token)
		if res.StatusCode != tc.want {
			t.Errorf("GET %s with token %q: status %d; want %d", tc.path, tc.token, res.StatusCode, tc.want)
		}
	}
	// A non-admin sees only their own calls.
	_, body := f.get(t, "/console/calls", userToken)
	if !strings.Contains(body, "ls") || strings.Contains(body, "secret-of-bob") {
		t.Errorf("alice's calls page shows another principal's call or misses hers:\n%s", body)
	}
	// Logging in sets a cookie that works without the header.
	_, page := f.get(t, "/console/login", "")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("login page without CSRF token")
	}
	res, err := noRedirect.PostForm(f.srv.URL+"/console/login", url.Values{"token": {adminToken}, "csrf": {m[1]}, "next": {"/console/charts"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/charts" || len(res.Cookies()) == 0 {
		t.Fatalf("login: status %d location %q cookies %v", res.StatusCode, res.Header.Get("Location"), res.Cookies())
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/console/upstreams", nil)
	req.AddCookie(res.Cookies()[0])
	res2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if res2.StatusCode != http.StatusOK {
		t.Errorf("GET /upstreams with the login cookie: status %d", res2.StatusCode)
	}
	// A bad token is refused at login.
	res, err = noRedirect.PostForm(f.srv.URL+"/console/login", url.Values{"token": {"nope"}, "csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a bad token: status %d; want 401", res.StatusCode)
	}
}

func TestCSRF(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	_, page := f.get(t, "/console/approvals", "")
	m := regexp.MustCompile(`"X-CSRF-Token":"([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token for htmx on the approvals page:\n%s", page)
	}
	for _, tc := range []struct {
		name   string
		csrf   string
		origin string
		want   int
	}{
		{"no token", "", "", http.StatusForbidden},
		{"wrong token", "AAAA", "", http.StatusForbidden},
		{"other origin", m[1], "http://localhost:1", http.StatusForbidden},
		{"good", m[1], "", http.StatusSeeOther},
		// A browser's plain form POST under some referrer policies.
		{"opaque origin, good token", m[1], "null", http.StatusSeeOther},
		{"opaque origin, no token", "", "null", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"decision": {"approve"}}
			if tc.csrf != "" {
				form.Set("csrf", tc.csrf)
			}
			req, _ := http.NewRequest("POST", f.srv.URL+"/console/approvals/"+strings.Repeat("a", 26), strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			res, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Errorf("status %d; want %d", res.StatusCode, tc.want)
			}
		})
	}
}

func TestLiveCallsFeed(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	res, err := http.Get(f.srv.URL + "/console/calls/events?tool=bash")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %q", ct)
	}
	f.record(t, rec("fs.read", "", "ok", `{"path":"a"}`), rec("bash", "", "error", `{"command":"make test"}`))
	r := bufio.NewReader(res.Body)
	got := make(chan Call, 1)
	go func() {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var c Call
				json.Unmarshal([]byte(data), &c)
				got <- c
				return
			}
		}
	}()
	select {
	case c := <-got:
		if diff := cmp.Diff([]string{"bash", "error", `{"command":"make test"}`}, []string{c.Tool, c.Outcome, string(c.Args)}); diff != "" {
			t.Errorf("streamed call (-want +got):\n%s", diff)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no call streamed")
	}
	// The table, its filters and search.
	for _, tc := range []struct {
		query      string
		want, miss string
	}{
		{"", "make test", ""},
		{"?tool=fs.", `{&#34;path&#34;:&#34;a&#34;}`, "make test"},
		{"?outcome=error", "make test", "&#34;path&#34;"},
		{"?q=MAKE", "make test", "&#34;path&#34;"},
		{"?since=1h", "make test", ""},
	} {
		res, body := f.get(t, "/console/calls"+tc.query, "")
		if res.StatusCode != 200 || !strings.Contains(body, tc.want) || (tc.miss != "" && strings.Contains(body, tc.miss)) {
			t.Errorf("/console/calls%s: status %d; want %q and not %q in\n%s", tc.query, res.StatusCode, tc.want, tc.miss, body)
		}
	}
	if res, _ := f.get(t, "/console/calls?outcome=maybe", ""); res.StatusCode != http.StatusBadRequest {
		t.Errorf("bad outcome filter: status %d; want 400", res.StatusCode)
	}
	// A call's detail page, by seq.
	calls := f.c.feed.recent(&Filter{Tool: "bash"}, 1)
	if len(calls) != 1 {
		t.Fatal("bash call not in the ring")
	}
	res2, body := f.get(t, fmt.Sprintf("/console/calls/%d", calls[0].Seq), "")
	if res2.StatusCode != 200 || !strings.Contains(body, "make test") {
		t.Errorf("detail page: status %d\n%s", res2.StatusCode, body)
	}
	if res, _ := f.get(t, "/console/calls/99999", ""); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown call: status %d; want 404", res.StatusCode)
	}
	// The chain check is shown.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := f.get(t, "/console/calls", "")
		if strings.Contains(body, "Audit chain intact: 2 records") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no chain check result on the page:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFeedFollowsRotation: calls written across a rotation all reach
// the ring, which stays within max_calls.
func TestFeedFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	l, err := audit.Open(audit.Options{Dir: dir, MaxFileBytes: 2000, KeepFiles: -1, CommitInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fd := newFeed(dir, 30, 5*time.Millisecond, nil)
	fd.start()
	defer fd.close()
	for i := range 100 {
		l.Record(rec("bash", "", "ok", fmt.Sprintf(`{"i":%d}`, i)))
		if i%10 == 9 {
			l.Flush()
			time.Sleep(15 * time.Millisecond)
		}
	}
	l.Flush()
	deadline := time.Now().Add(5 * time.Second)
	for {
		calls := fd.recent(&Filter{}, 1000)
		if len(calls) > 0 && string(calls[0].Args) == `{"i":99}` {
			if len(calls) > 30 {
				t.Errorf("ring holds %d calls; want at most 30", len(calls))
			}
			for i := 1; i < len(calls); i++ {
				if calls[i].Seq != calls[i-1].Seq-1 {
					t.Fatalf("calls skipped or repeated across rotation: seq %d after %d", calls[i].Seq, calls[i-1].Seq)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the feed did not follow the rotations; newest %v", calls[:min(1, len(calls))])
		}
		time.Sleep(10 * time.Millisecond)
	}
	rotated, _ := audit.Rotated(dir)
	if len(rotated) < 3 {
		t.Fatalf("only %d rotations; the test wants several", len(rotated))
	}
	// A new feed loads the newest calls from every file.
	fd2 := newFeed(dir, 50, time.Second, nil)
	fd2.start()
	defer fd2.close()
	calls := fd2.recent(&Filter{}, 1000)
	if len(calls) != 50 || string(calls[0].Args) != `{"i":99}` || string(calls[49].Args) != `{"i":50}` {
		t.Errorf("history: %d calls, newest %s, oldest %s; want 50 from 99 to 50", len(calls), calls[0].Args, calls[len(calls)-1].Args)
	}
}

func TestApprovalsPage(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	now := time.Now()
	p := confirm.Pending{ID: confirm.NewID(), Created: now, Deadline: now.Add(time.Minute), Tool: "run_code", Args: json.RawMessage(`{"code":"print(await tools.bash(command='rm -rf build'))"}`), Profile: "default", Principal: "alice"}
	if err := f.q.Add(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	expired := confirm.Pending{ID: confirm.NewID(), Created: now.Add(-time.Hour), Deadline: now.Add(-time.Second), Tool: "bash", Profile: "default"}
	if err := f.q.Add(t.Context(), expired); err != nil {
		t.Fatal(err)
	}
	res, body := f.get(t, "/console/approvals", "")
	if res.StatusCode != 200 || !strings.Contains(body, "appr-"+p.ID) || !strings.Contains(body, "<h3>Code</h3>") || !strings.Contains(body, "rm -rf build") {
		t.Fatalf("approvals page misses the pending run_code call or its code:\n%s", body)
	}
	if strings.Contains(body, expired.ID) {
		t.Error("an expired call is listed")
	}
	_, list := f.get(t, "/console/approvals/list", "")
	if !strings.Contains(list, "appr-"+p.ID) || strings.Contains(list, "<html") {
		t.Errorf("the list fragment: %s", list)
	}
	csrf := csrfRE.FindStringSubmatch(body)[1]
	post := func() *http.Response {
		res, err := noRedirect.PostForm(f.srv.URL+"/console/approvals/"+p.ID, url.Values{"decision": {"deny"}, "reason": {"too broad"}, "csrf": {csrf}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := post(); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/approvals?done=denied" {
		t.Fatalf("deny: status %d location %q", res.StatusCode, res.Header.Get("Location"))
	}
	d, err := f.q.Wait(t.Context(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Approved || d.Reason != "too broad" || d.By != "local" {
		t.Errorf("decision %+v; want denied by local for 'too broad'", d)
	}
	// Only the first decision counts.
	if res := post(); res.Header.Get("Location") != "/console/approvals?done=gone" {
		t.Errorf("second decision: location %q; want done=gone", res.Header.Get("Location"))
	}
	// htmx gets the item's new content instead of a redirect.
	p2 := confirm.Pending{ID: confirm.NewID(), Created: now, Deadline: now.Add(time.Minute), Tool: "bash", Args: json.RawMessage(`{}`), Profile: "default"}
	if err := f.q.Add(t.Context(), p2); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", f.srv.URL+"/console/approvals/"+p2.ID, strings.NewReader(url.Values{"decision": {"approve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	req.Header.Set("X-CSRF-Token", csrf)
	res2, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	frag, _ := io.ReadAll(res2.Body)
	res2.Body.Close()
	if res2.StatusCode != 200 || !strings.Contains(string(frag), `id="appr-`+p2.ID+`"`) || !strings.Contains(string(frag), "Approved by local") {
		t.Errorf("htmx decision: status %d, %s", res2.StatusCode, frag)
	}
	if d, err := f.q.Wait(t.Context(), p2.ID); err != nil || !d.Approved {
		t.Errorf("htmx decision recorded %+v, %v", d, err)
	}
}

func TestChartsData(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	var recs []audit.Record
	for i := range 20 {
		r := rec("bash", "", "ok", `{}`)
		r.Duration = time.Duration(i+1) * time.Millisecond
		if i%4 == 0 {
			r.Outcome = "error"
		}
		recs = append(recs, r)
	}
	recs = append(recs, rec("fs.read", "", "ok", `{}`))
	f.record(t, recs...)
	f.waitRows(t, 21)
	res, body := f.get(t, "/console/charts/data?range=hour", "")
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	var d ChartData
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	if d.Calls != 21 || len(d.Times) != 60 || len(d.Stats) != 2 {
		t.Fatalf("calls %d, %d points, %d tools; want 21, 60, 2", d.Calls, len(d.Times), len(d.Stats))
	}
	b := d.Stats[0]
	if b.Tool != "bash" || b.Calls != 20 || b.Errors != 5 || b.ErrorRate != 25 {
		t.Errorf("bash stats %+v", b)
	}
	// p50 of 1..20 ms is 10 ms, p99 20 ms, within the histogram's 10%.
	if b.P50 < 10 || b.P50 > 11 || b.P99 < 20 || b.P99 > 22 {
		t.Errorf("bash p50 %v p99 %v; want about 10 and 20", b.P50, b.P99)
	}
	if res, _ := f.get(t, "/console/charts/data?range=year", ""); res.StatusCode != http.StatusBadRequest {
		t.Errorf("range=year: status %d; want 400", res.StatusCode)
	}
	if res, body := f.get(t, "/console/charts?range=week", ""); res.StatusCode != 200 || !strings.Contains(body, "uPlot.iife.min.js") {
		t.Errorf("charts page: status %d", res.StatusCode)
	}
	// The page carries the series its table came from, so its script
	// draws them without asking for them again (one pass over the log
	// per view, not two).
	_, page := f.get(t, "/console/charts?range=hour", "")
	m := regexp.MustCompile(`data-chart="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("charts page without data-chart:\n%s", page)
	}
	var inPage ChartData
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &inPage); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, inPage); diff != "" {
		t.Errorf("the page's series differ from /charts/data's (-data +page):\n%s", diff)
	}
	_, js := f.get(t, "/console/static/charts.js", "")
	if strings.Contains(js, "fetch(") {
		t.Error("charts.js fetches its data again")
	}
}

func TestReadOnlyPages(t *testing.T) {
	f := newFixture(t, "[profiles.default]\nworkspace = \"WS\"\n[profiles.coder]\nworkspace = \"WS\"\ncode_mode = true\n", true)
	for _, tc := range []struct{ path, want string }{
		{"/console/sessions", "mcp:coder"},
		{"/console/sessions?profile=default", "mcp:default"},
		{"/console/tools", "coder"},
		{"/console/upstreams", "No upstream servers"},
	} {
		res, body := f.get(t, tc.path, "")
		if res.StatusCode != 200 || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: status %d, want %q in\n%s", tc.path, res.StatusCode, tc.want, body)
		}
	}
	// Reading sessions writes nothing to them.
	if ents, _ := os.ReadDir(filepath.Join(f.home, "tapes")); len(ents) != 0 {
		t.Errorf("the sessions page wrote tapes: %v", ents)
	}
}

// A call that reaches the ring after the calls page rendered but before
// its event stream subscribed is still streamed: the page names the newest
// seq it rendered ("after"), and a reconnect's Last-Event-ID wins over it.
// Without the backlog the browser test's approved call never showed.
func TestLiveCallsNoGap(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	f.record(t, rec("fs.read", "", "ok", `{"path":"a"}`))
	f.waitRows(t, 1)
	page, err := http.Get(f.srv.URL + "/console/calls?tool=bash")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	m := regexp.MustCompile(`data-events="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no events URL in the calls page:\n%s", body)
	}
	events := html.UnescapeString(string(m[1]))
	// The gap: two calls arrive before the page subscribes.
	f.record(t, rec("bash", "", "ok", `{"command":"one"}`), rec("bash", "", "ok", `{"command":"two"}`))
	f.waitRows(t, 3)
	for _, tc := range []struct {
		name, lastEventID string
		want              []string
	}{
		{"after the render", "", []string{`{"command":"one"}`, `{"command":"two"}`}},
		{"reconnect", "2", []string{`{"command":"two"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", f.srv.URL+events, nil)
			if tc.lastEventID != "" {
				req.Header.Set("Last-Event-ID", tc.lastEventID)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			got := make(chan string, len(tc.want))
			go func() {
				r := bufio.NewReader(res.Body)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if data, ok := strings.CutPrefix(line, "data: "); ok {
						var c Call
						json.Unmarshal([]byte(data), &c)
						got <- string(c.Args)
					}
				}
			}()
			var streamed []string
			for range tc.want {
				select {
				case a := <-got:
					streamed = append(streamed, a)
				case <-time.After(5 * time.Second):
					t.Fatalf("streamed %q; want %q", streamed, tc.want)
				}
			}
			if diff := cmp.Diff(tc.want, streamed); diff != "" {
				t.Errorf("streamed (-want +got):\n%s", diff)
			}
		})
	}
}

// A plain [[auth.tokens]] entry named like a console admin would log in
// as that admin (the login cookie names its principal): the console
// refuses to start with two tokens of one name.
func TestDuplicateTokenNamesRefused(t *testing.T) {
	src := strings.Replace(tokensConfig, `name = "alice"`, `name = "ops"`, 1)
	home, ws := t.TempDir(), t.TempDir()
	cfg, err := config.Parse("bub.toml", strings.ReplaceAll(src, "WS", ws), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Home: home, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, err := New(Options{App: a, Loopback: true})
	if err == nil {
		c.Close()
		t.Fatal("New accepted two tokens named ops")
	}
	if !strings.Contains(err.Error(), `two tokens are named "ops"`) {
		t.Errorf("error %q; want one naming the duplicate", err)
	}
}
