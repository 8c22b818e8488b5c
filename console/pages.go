package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/confirm"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/bubbuild/bub-mcp/upstream"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pages are parsed once, on first use: the layout with each page. Not in
// init, where every bub-mcp process (serve without a console too) paid
// 0.8 ms of its start-up for them (GODEBUG=inittrace=1).
var pages = sync.OnceValue(func() map[string]*template.Template {
	funcs := template.FuncMap{
		"stamp": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") },
		"short": func(t time.Time) string { return t.Local().Format("15:04:05") },
		"ms":    func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) + " ms" },
		"pretty": func(raw json.RawMessage) string {
			var b bytes.Buffer
			if json.Indent(&b, raw, "", "  ") != nil {
				return string(raw)
			}
			return b.String()
		},
		"cut": func(s string, n int) string {
			if len(s) <= n {
				return s
			}
			for n > 0 && (s[n]&0xC0) == 0x80 {
				n--
			}
			return s[:n] + "…"
		},
		"deref": func(b *bool) bool { return b != nil && *b },
		"who":   whoOf,
		"whoIs": whoNamed,
		"pct":   func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "%" },
		"num":   func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
		"left":  func(t time.Time) string { return time.Until(t).Round(time.Second).String() },
		// json puts data in an attribute for a script to read: the
		// charts page carries its series, computed once with the page.
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
	}
	out := map[string]*template.Template{}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		out[base] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n))
	}
	return out
})

// page is what every template gets.
type page struct {
	// Base is where the console's paths start (Prefix): every link,
	// form, script and fetch of a page is under it.
	Base    string
	Title   string
	Nav     string
	Viewer  viewer
	CSRF    string
	Version string
	Data    any
}

func (c *Console) routes() {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	files := http.FileServerFS(static)
	mux.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", cacheStatic(files)))
	mux.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	mux.HandleFunc("POST "+Prefix+"/login", c.login)
	mux.HandleFunc("POST "+Prefix+"/logout", c.auth(c.logout))
	home := http.RedirectHandler(Prefix+"/calls", http.StatusSeeOther)
	mux.Handle("GET "+Prefix, home)
	mux.Handle("GET "+Prefix+"/{$}", home)
	if c.o.Standalone {
		mux.Handle("GET /{$}", home)
	}
	mux.HandleFunc("GET "+Prefix+"/calls", c.auth(c.callsPage))
	mux.HandleFunc("GET "+Prefix+"/calls/events", c.auth(c.callEvents))
	mux.HandleFunc("GET "+Prefix+"/calls/{seq}", c.auth(c.callPage))
	mux.HandleFunc("GET "+Prefix+"/approvals", c.auth(c.approvalsPage))
	mux.HandleFunc("GET "+Prefix+"/approvals/list", c.auth(c.approvalsList))
	mux.HandleFunc("POST "+Prefix+"/approvals/{id}", c.auth(c.decide))
	mux.HandleFunc("GET "+Prefix+"/charts", c.auth(c.chartsPage))
	mux.HandleFunc("GET "+Prefix+"/charts/data", c.auth(c.chartsData))
	mux.HandleFunc("GET "+Prefix+"/sessions", c.admin(c.sessionsPage))
	mux.HandleFunc("GET "+Prefix+"/tools", c.auth(c.toolsPage))
	mux.HandleFunc("GET "+Prefix+"/upstreams", c.admin(c.upstreamsPage))
	mux.HandleFunc("POST "+Prefix+"/upstreams/{name}/approve", c.admin(c.upstreamDecide))
	mux.HandleFunc("POST "+Prefix+"/upstreams/{name}/reject", c.admin(c.upstreamDecide))
	c.mux = mux
}

// cacheStatic lets browsers keep the vendored assets for an hour.
func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// auth runs h for a known viewer; others go to the login page (pages) or
// get 401 (everything else).
func (c *Console) auth(h func(http.ResponseWriter, *http.Request, viewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := c.who(r)
		if err != nil {
			// A page (one path segment under Prefix) leads to the login;
			// its parts (event streams, lists, forms) are refused.
			if errors.Is(err, errNoLogin) && r.Method == http.MethodGet && !strings.Contains(strings.TrimPrefix(r.URL.Path, Prefix+"/"), "/") {
				http.Redirect(w, r, Prefix+"/login?next="+urlQueryEscape(r.URL.Path), http.StatusSeeOther)
				return
			}
			if e := auth.AsError(err); e != nil {
				// An OAuth refusal: 401 with the resource metadata, 403
				// for a principal no console rule grants, 503 when the
				// issuer cannot be reached; its cause (never a token) is
				// logged.
				c.log.Debug("console: OAuth token refused", "status", e.Status, "error", err)
				c.o.OAuth.WriteError(w, r, err)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="bub-mcp console"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if err := c.checkCSRF(r, v); err != nil {
				http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
				return
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, v)
	}
}

// admin is auth for pages only admins see.
func (c *Console) admin(h func(http.ResponseWriter, *http.Request, viewer)) http.HandlerFunc {
	return c.auth(func(w http.ResponseWriter, r *http.Request, v viewer) {
		if !v.Admin {
			http.Error(w, "forbidden: this page is for console admins (a [[console.tokens]] token, or [[auth.tokens]] with admin = true)", http.StatusForbidden)
			return
		}
		h(w, r, v)
	})
}

func urlQueryEscape(s string) string {
	return template.URLQueryEscaper(nextPage(s))
}

func (c *Console) render(w http.ResponseWriter, status int, name string, p page) {
	var b bytes.Buffer
	if err := pages()[name].Execute(&b, p); err != nil {
		c.log.Error("console: render", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func (c *Console) page(v viewer, nav, title string, data any) page {
	return page{Base: Prefix, Title: title, Nav: nav, Viewer: v, CSRF: c.csrfToken(v), Version: c.o.Version, Data: data}
}

// --- login ---

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if !c.needsLogin() {
		http.Redirect(w, r, Prefix+"/calls", http.StatusSeeOther)
		return
	}
	c.render(w, http.StatusOK, "login", c.page(viewer{Name: "login", ID: "login"}, "", "Log in", map[string]string{"Next": nextPage(r.URL.Query().Get("next"))}))
}

// nextPage is where a login leads: next when it is a console page (a
// path under Prefix, never another host or another part of a serve),
// else the live calls.
func nextPage(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.Contains(next, "//") || strings.Contains(next, "\\") || strings.Contains(next, "..") {
		return Prefix + "/calls"
	}
	return next
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := c.checkCSRF(r, viewer{Name: "login", ID: "login"}); err != nil {
		http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
		return
	}
	p, ok := c.byToken(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		c.render(w, http.StatusUnauthorized, "login", c.page(viewer{Name: "login", ID: "login"}, "", "Log in", map[string]string{"Next": nextPage(r.PostFormValue("next")), "Error": "That token is not valid for the console."}))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.sessionValue(p.Name), Path: Prefix + "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https", MaxAge: int(sessionTTL.Seconds())})
	http.Redirect(w, r, nextPage(r.PostFormValue("next")), http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, v viewer) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix + "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// --- live calls ---

// maxListed bounds the rows of the calls table.
const maxListed = 500

// filterFrom reads the filter form; a non-admin sees only their calls.
func filterFrom(r *http.Request, v viewer) (Filter, error) {
	q := r.URL.Query()
	f := Filter{Principal: q.Get("principal"), Profile: q.Get("profile"), Tool: q.Get("tool"), Outcome: q.Get("outcome"), Text: q.Get("q")}
	if f.Outcome != "" && f.Outcome != "ok" && f.Outcome != "error" {
		return f, fmt.Errorf("outcome: want ok or error, not %q", f.Outcome)
	}
	for _, t := range []struct {
		key string
		dst *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		s := q.Get(t.key)
		if s == "" {
			continue
		}
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			*t.dst = time.Now().Add(-d)
			continue
		}
		var err error
		for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
			var tm time.Time
			if tm, err = time.ParseInLocation(layout, s, time.Local); err == nil {
				*t.dst = tm
				break
			}
		}
		if err != nil {
			return f, fmt.Errorf("%s: want a time (2026-01-02T15:04) or a duration back from now (1h), not %q", t.key, s)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Since.After(f.Until) {
		// Every call would be filtered out: say why rather than list none.
		return f, fmt.Errorf("since (%s) is after until (%s): no call can match", q.Get("since"), q.Get("until"))
	}
	if !v.Admin {
		f.Principal = v.Name
	}
	return f, nil
}

type callsData struct {
	Calls     []Call
	Filter    Filter
	Query     map[string]string
	Err       string
	FromFiles bool
	Verify    verifyView
	EventsURL string
}

type verifyView struct {
	Done    bool
	Intact  bool
	Records int
	First   int64
	Last    int64
	Problem string
	Err     string
	At      time.Time
}

func (c *Console) callsPage(w http.ResponseWriter, r *http.Request, v viewer) {
	f, err := filterFrom(r, v)
	d := callsData{Filter: f, Query: map[string]string{}}
	for _, k := range []string{"principal", "profile", "tool", "outcome", "since", "until", "q"} {
		d.Query[k] = r.URL.Query().Get(k)
	}
	status := http.StatusOK
	if err != nil {
		d.Err = err.Error()
		status = http.StatusBadRequest
	} else {
		// A range older than what the ring holds is read from the files.
		if oldest := c.feed.oldest(); !f.Since.IsZero() && (oldest.IsZero() || f.Since.Before(oldest)) {
			d.FromFiles = true
			d.Calls = c.scanMatching(&f, maxListed)
		} else {
			d.Calls = c.feed.recent(&f, maxListed)
		}
		ev := r.URL.Query()
		ev.Del("since")
		// The stream starts where this render ended, so a call added
		// between the two is sent, not lost.
		ev.Set("after", strconv.FormatInt(c.feed.lastSeq(), 10))
		d.EventsURL = Prefix + "/calls/events?" + ev.Encode()
	}
	if v.Admin {
		rep, at, verr := c.auditReport()
		d.Verify = verifyView{At: at}
		switch {
		case verr != nil:
			d.Verify.Done, d.Verify.Err = true, verr.Error()
		case rep != nil:
			d.Verify = verifyView{Done: true, Intact: rep.Intact(), Records: rep.Records, First: rep.First, Last: rep.Last, At: at}
			if rep.Problem != nil {
				d.Verify.Problem = rep.Problem.Error()
			}
		}
	}
	c.render(w, status, "calls", c.page(v, "calls", "Live calls", d))
}

// scanMatching reads the log files for the newest limit matches of f.
func (c *Console) scanMatching(f *Filter, limit int) []Call {
	var ring []Call
	c.scanLog(f.Since, func(call Call) bool {
		if !f.Until.IsZero() && call.Time.After(f.Until) {
			return false
		}
		if f.Match(&call) {
			ring = append(ring, call)
			if len(ring) > 2*limit {
				ring = append(ring[:0], ring[len(ring)-limit:]...)
			}
		}
		return true
	})
	if len(ring) > limit {
		ring = ring[len(ring)-limit:]
	}
	slices.Reverse(ring)
	return ring
}

// sseHeartbeat keeps idle event streams (and proxies) awake.
const sseHeartbeat = 15 * time.Second

// callEvents streams new calls matching the filter as server-sent events
// (event "call", JSON data).
func (c *Console) callEvents(w http.ResponseWriter, r *http.Request, v viewer) {
	f, err := filterFrom(r, v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.Since = time.Time{}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	// after is the newest seq the page already has: the render's (the
	// "after" parameter) or, when EventSource reconnects, the last event's.
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if id, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && id > after {
		after = id
	}
	ch, backlog, cancel := c.feed.subscribeAfter(after)
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n: ok\n\n")
	send := func(call *Call) {
		if call.Seq <= after || !f.Match(call) {
			return // sent already (backlog and channel overlap), or filtered out
		}
		after = call.Seq
		b, _ := json.Marshal(callEvent{Call: call, Who: whoNamed(call.Principal, call.PrincipalName)})
		fmt.Fprintf(w, "id: %d\nevent: call\ndata: %s\n\n", call.Seq, b)
	}
	for i := range backlog {
		send(&backlog[i])
	}
	fl.Flush()
	hb := time.NewTicker(sseHeartbeat)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-hb.C:
			fmt.Fprint(w, ": ping\n\n")
			fl.Flush()
		case call := <-ch:
			send(&call)
			// Send what else is queued in the same flush.
			for more := true; more; {
				select {
				case call := <-ch:
					send(&call)
				default:
					more = false
				}
			}
			fl.Flush()
		}
	}
}

func (c *Console) callPage(w http.ResponseWriter, r *http.Request, v viewer) {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq <= 0 {
		http.Error(w, "not found: a call is named by its seq, a positive number", http.StatusNotFound)
		return
	}
	call, ok := c.feed.bySeq(seq)
	// Past the newest call the feed has read, there is nothing to find:
	// no reading every retained file for a seq anyone can type.
	if last := c.feed.lastSeq(); !ok && last > 0 && seq <= last {
		c.scanLog(time.Time{}, func(x Call) bool {
			if x.Seq == seq {
				call, ok = x, true
				return false
			}
			return true
		})
	}
	if !ok || (!v.Admin && call.Principal != v.Name) {
		http.Error(w, fmt.Sprintf("not found: no call with seq %d in the audit log", seq), http.StatusNotFound)
		return
	}
	c.render(w, http.StatusOK, "call", c.page(v, "calls", fmt.Sprintf("Call %d: %s", seq, call.Tool), call))
}

// --- approvals ---

type pendingView struct {
	confirm.Pending
	Code string // run_code's code, shown as code
}

func (c *Console) pending(r *http.Request, v viewer) ([]pendingView, error) {
	ps, err := c.queue.List(r.Context())
	if err != nil {
		return nil, err
	}
	var out []pendingView
	for _, p := range ps {
		if !v.Admin && p.Principal != v.Name {
			continue
		}
		pv := pendingView{Pending: p}
		if p.Tool == "run_code" {
			var a struct {
				Code string `json:"code"`
			}
			if json.Unmarshal(p.Args, &a) == nil {
				pv.Code = a.Code
			}
		}
		out = append(out, pv)
	}
	return out, nil
}

type approvalsData struct {
	Pending []pendingView
	Err     string
	Flash   string
}

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, v viewer) {
	ps, err := c.pending(r, v)
	d := approvalsData{Pending: ps}
	if err != nil {
		d.Err = err.Error()
	}
	switch r.URL.Query().Get("done") {
	case "approved":
		d.Flash = "Approved: the call goes on."
	case "denied":
		d.Flash = "Denied: the call fails with your reason."
	case "gone":
		d.Flash = "That call is no longer waiting (decided elsewhere, timed out or withdrawn)."
	}
	c.render(w, http.StatusOK, "approvals", c.page(v, "approvals", "Approvals", d))
}

// approvalsList is the queue alone, which the page reloads every second.
func (c *Console) approvalsList(w http.ResponseWriter, r *http.Request, v viewer) {
	ps, err := c.pending(r, v)
	d := approvalsData{Pending: ps}
	if err != nil {
		d.Err = err.Error()
	}
	var b bytes.Buffer
	if err := pages()["approvals"].ExecuteTemplate(&b, "queue", c.page(v, "approvals", "", d)); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

func (c *Console) decide(w http.ResponseWriter, r *http.Request, v viewer) {
	id := r.PathValue("id")
	decision := r.PostFormValue("decision")
	if decision != "approve" && decision != "deny" {
		http.Error(w, "bad request: decision must be approve or deny", http.StatusBadRequest)
		return
	}
	if !v.Admin {
		ps, err := c.pending(r, v)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if !slices.ContainsFunc(ps, func(p pendingView) bool { return p.ID == id }) {
			c.decided(w, r, v, id, "gone")
			return
		}
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	err := c.queue.Decide(r.Context(), id, confirm.Decision{Approved: decision == "approve", Reason: reason, By: v.Name, At: time.Now().UTC()})
	switch {
	case errors.Is(err, confirm.ErrNotPending):
		c.decided(w, r, v, id, "gone")
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.log.Info("console.decision", "id", id, "decision", decision, "by", v.Name)
	done := "approved"
	if decision == "deny" {
		done = "denied"
	}
	c.decided(w, r, v, id, done)
}

// decided answers a decision: htmx (HX-Request) gets the item's new
// content, a plain form post is redirected to the page with a notice.
func (c *Console) decided(w http.ResponseWriter, r *http.Request, v viewer, id, done string) {
	if r.Header.Get("HX-Request") != "true" {
		http.Redirect(w, r, Prefix+"/approvals?done="+done, http.StatusSeeOther)
		return
	}
	msg := map[string]string{
		"approved": "Approved by " + v.Name + ": the call goes on.",
		"denied":   "Denied by " + v.Name + ": the call fails with your reason.",
		"gone":     "That call is no longer waiting (decided elsewhere, timed out or withdrawn).",
	}[done]
	var b bytes.Buffer
	if err := pages()["approvals"].ExecuteTemplate(&b, "decided", c.page(v, "approvals", "", map[string]string{"ID": id, "Message": msg})); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

// --- charts ---

func (c *Console) chartData(r *http.Request, v viewer) (*ChartData, error) {
	rng := r.URL.Query().Get("range")
	if rng == "" {
		rng = "hour"
	}
	if _, ok := chartRanges[rng]; !ok {
		return nil, fmt.Errorf("range: want hour, day or week, not %q", rng)
	}
	now := time.Now()
	agg := newChartAgg(now, rng)
	f := Filter{}
	if !v.Admin {
		f.Principal = v.Name
	}
	add := func(call Call) bool {
		if f.Match(&call) {
			agg.add(&call)
		}
		return true
	}
	if oldest := c.feed.oldest(); !oldest.IsZero() && !oldest.After(agg.start) {
		for _, call := range c.feed.recent(&Filter{Since: agg.start}, c.mod.MaxCalls) {
			add(call)
		}
	} else {
		c.scanLog(agg.start, add)
	}
	return agg.data(rng), nil
}

func (c *Console) chartsPage(w http.ResponseWriter, r *http.Request, v viewer) {
	d, err := c.chartData(r, v)
	if err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	c.render(w, http.StatusOK, "charts", c.page(v, "charts", "Charts", d))
}

func (c *Console) chartsData(w http.ResponseWriter, r *http.Request, v viewer) {
	d, err := c.chartData(r, v)
	if err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(d)
}

// --- sessions ---

type sessionView struct {
	Profile   string
	ID        string
	Workspace string
	Tape      string
	Info      sessions.Info
	Settings  sessions.Settings
	Anchors   []sessions.Anchor
	Entries   []entryView
	Err       string
}

type entryView struct {
	ID      int
	Kind    string
	Date    string
	Summary string
}

// maxEntriesShown bounds the entries listed per session.
const maxEntriesShown = 50

func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request, v viewer) {
	var out []sessionView
	cfg := c.a.Config()
	only := r.URL.Query().Get("profile")
	for _, name := range cfg.ProfileNames() {
		if only != "" && name != only {
			continue
		}
		sv := sessionView{Profile: name}
		conn := providers.Connection{Profile: name}
		if err := c.a.Resolve(r.Context(), &conn); err != nil {
			sv.Err = err.Error()
			out = append(out, sv)
			continue
		}
		sv.ID, sv.Workspace = conn.SessionKey, conn.Workspace
		sess, err := c.a.Session(&conn)
		if err != nil {
			sv.Err = err.Error()
			out = append(out, sv)
			continue
		}
		t := sess.Tape()
		sv.Tape = t.Name()
		sv.Info = t.Info()
		sv.Settings = sess.Settings()
		sv.Anchors = t.Anchors(0)
		if only != "" {
			es := t.Entries()
			for _, e := range es[max(0, len(es)-maxEntriesShown):] {
				b, _ := json.Marshal(e.Payload)
				sv.Entries = append(sv.Entries, entryView{ID: e.ID, Kind: e.Kind, Date: e.Date, Summary: string(b)})
			}
			slices.Reverse(sv.Entries)
		}
		out = append(out, sv)
	}
	c.render(w, http.StatusOK, "sessions", c.page(v, "sessions", "Sessions", map[string]any{"Sessions": out, "One": only != ""}))
}

// --- tools ---

type toolView struct {
	Name        string
	Description string
	Annotations string
	Schema      string
	Code        bool // callable only from run_code
}

type profileTools struct {
	Profile  string
	CodeMode bool
	Tools    []toolView
	Err      string
}

func (c *Console) toolsPage(w http.ResponseWriter, r *http.Request, v viewer) {
	cfg := c.a.Config()
	var out []profileTools
	for _, name := range cfg.ProfileNames() {
		if !v.Admin && name != v.Profile {
			continue
		}
		pt := profileTools{Profile: name}
		conn := providers.Connection{Profile: name, Transport: "console"}
		if err := c.a.Resolve(r.Context(), &conn); err != nil {
			pt.Err = err.Error()
			out = append(out, pt)
			continue
		}
		view, err := c.a.View(r.Context(), &conn)
		if err != nil {
			pt.Err = err.Error()
			out = append(out, pt)
			continue
		}
		pt.CodeMode = conn.CodeMode
		for i, list := range [][]*toolDesc{describe(view.Tools), describe(view.CodeTools)} {
			for _, t := range list {
				pt.Tools = append(pt.Tools, toolView{Name: t.name, Description: t.desc, Annotations: t.ann, Schema: t.schema, Code: i == 1})
			}
		}
		out = append(out, pt)
	}
	c.render(w, http.StatusOK, "tools", c.page(v, "tools", "Tools", out))
}

// --- upstreams ---

// upstreamView is one upstream server on the upstreams page: its status
// and what awaits approval (each tool's unified diff against its pin).
type upstreamView struct {
	upstream.Status
	Changes []upstream.ToolChange
	// Gone are pinned tools the server no longer lists (a rename shows
	// as one of these and a new tool).
	Gone    []string
	DiffErr string
	// SignedIn are the principals with their own credentials for an
	// auth = "oauth" server (names only, never a token); CredErr says why
	// they could not be listed.
	SignedIn []string
	CredErr  string
}

// upstreamsData is the upstreams page's data.
type upstreamsData struct {
	Servers []upstreamView
	Flash   string
}

func (c *Console) upstreamsPage(w http.ResponseWriter, r *http.Request, v viewer) {
	d := upstreamsData{Flash: upstreamFlash(r.URL.Query().Get("done"), r.URL.Query().Get("server"))}
	if m, ok := upstream.FromApp(c.a); ok {
		for _, st := range m.Status() {
			uv := upstreamView{Status: st}
			if st.Pin != upstream.PinOff {
				ch, gone, err := m.PinDiff(st.Name)
				if err != nil {
					uv.DiffErr = err.Error()
				}
				uv.Changes, uv.Gone = ch, gone
			}
			if st.Auth == upstream.AuthOAuth {
				who, err := m.Principals(r.Context(), st.Name)
				if err != nil {
					uv.CredErr = err.Error()
				}
				uv.SignedIn = who
			}
			d.Servers = append(d.Servers, uv)
		}
	}
	c.render(w, http.StatusOK, "upstreams", c.page(v, "upstreams", "Upstreams", d))
}

// upstreamFlash is the notice after an approval or a rejection; only
// known words are shown (the query is the visitor's).
func upstreamFlash(done, server string) string {
	if !validName(server) {
		return ""
	}
	switch done {
	case "approved":
		return "Approved the quarantined tools of " + server + ": they are pinned now, and every server on this $BUB_HOME offers them within seconds."
	case "rejected":
		return "Rejected the changes of " + server + ": its tools stay quarantined; the rejection is in the audit log."
	}
	return ""
}

// validName is an upstream name as a console URL may carry it.
func validName(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// upstreamDecide approves (pins) or rejects an upstream server's
// quarantined tool definitions: all of them, or the form's tool fields.
// A rejection changes no pin (the tools stay held back, as they are
// until a human approves them); it is written to the audit log, so
// whoever looks next sees who refused what.
func (c *Console) upstreamDecide(w http.ResponseWriter, r *http.Request, v viewer) {
	name := r.PathValue("name")
	m, ok := upstream.FromApp(c.a)
	if !ok || !validName(name) {
		http.Error(w, "not found: no upstream server "+strconv.Quote(name), http.StatusNotFound)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	tools := r.PostForm["tool"]
	if len(tools) > 1000 {
		http.Error(w, "bad request: at most 1000 tool fields", http.StatusBadRequest)
		return
	}
	done := "approved"
	if strings.HasSuffix(r.URL.Path, "/reject") {
		done = "rejected"
		changes, _, err := m.PinDiff(name)
		if err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		var rejected []string
		for _, ch := range changes {
			if len(tools) == 0 || slices.Contains(tools, ch.Tool) {
				rejected = append(rejected, ch.Tool)
				args, _ := json.Marshal(map[string]string{"upstream": name, "tool": ch.Tool, "reason": ch.Reason, "note": strings.TrimSpace(r.PostFormValue("reason"))})
				c.a.Audit(audit.Record{Principal: v.ID, Transport: "console", Mode: "pin", Tool: "upstream.reject", Args: args, Outcome: "ok"})
			}
		}
		if len(rejected) == 0 {
			http.Error(w, "bad request: upstream "+name+": no such tool awaits approval", http.StatusBadRequest)
			return
		}
		c.log.Info("console.upstream.reject", "upstream", name, "tools", rejected, "by", v.Name)
	} else {
		approved, err := m.Approve(name, tools, "console:"+v.ID)
		if err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		c.log.Info("console.upstream.approve", "upstream", name, "tools", approved, "by", v.Name)
	}
	http.Redirect(w, r, Prefix+"/upstreams?done="+done+"&server="+url.QueryEscape(name), http.StatusSeeOther)
}

type toolDesc struct{ name, desc, ann, schema string }

// describe renders tools for the tools page: annotations as words, the
// input schema indented.
func describe(tools []*registry.Tool) []*toolDesc {
	out := make([]*toolDesc, 0, len(tools))
	for _, t := range tools {
		var ann []string
		a := t.Annotations
		if a.Title != "" {
			ann = append(ann, "title: "+a.Title)
		}
		for _, f := range []struct {
			on   bool
			name string
		}{{a.ReadOnly, "read-only"}, {a.Destructive, "destructive"}, {a.Idempotent, "idempotent"}, {a.OpenWorld, "open world"}} {
			if f.on {
				ann = append(ann, f.name)
			}
		}
		var b bytes.Buffer
		if json.Indent(&b, t.InputSchema, "", "  ") != nil {
			b.Reset()
			b.Write(t.InputSchema)
		}
		out = append(out, &toolDesc{name: t.Name, desc: t.Description, ann: strings.Join(ann, ", "), schema: b.String()})
	}
	return out
}
