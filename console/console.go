// Package console is bub-mcp's operator console: web pages, served by
// `bub-mcp console`, over the same $BUB_HOME the servers use: the audit
// log as a live table (server-sent events) with filters, a call's detail
// and the chain check; charts of calls, errors and durations; the
// approvals queue, where a person approves or denies calls that a
// profile's confirm_via sends to the console (clients without
// elicitation); sessions (tapes, anchors, settings); each profile's
// tools; and the upstream servers.
//
// The pages are html/template, with vendored htmx and uPlot embedded
// (static/, each with its license): no Node toolchain is needed to build
// or run it. Every POST carries a CSRF token; the Content-Security-Policy
// allows scripts and styles from the console itself only (no inline
// ones); pages cannot be framed; on a loopback bind the Host and Origin
// must be local names (DNS rebinding). Any other bind needs tokens.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/confirm"
	"github.com/bubbuild/bub-mcp/internal/hostcheck"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configure a Console. App is required.
type Options struct {
	// App is an App over the servers' configuration and $BUB_HOME: its
	// config, session store, views and upstream module are what the
	// pages show.
	App *app.App
	// Queue is the approvals queue; nil means confirm.QueueFor(App).
	Queue confirm.Queue
	// AuditDir is the audit log's directory; "" means $BUB_HOME/audit.
	AuditDir string
	// Loopback says the console listens on loopback addresses only: it
	// then checks Host and Origin (DNS rebinding), and may run without
	// tokens.
	Loopback bool
	// AllowedHosts extends the local host names the Host check accepts
	// ([server] allowed_hosts).
	AllowedHosts []string
	// PollInterval is how often the audit log is checked for new calls;
	// 0 means 250ms.
	PollInterval time.Duration
	// Logger receives the console's own logs; nil means slog.Default().
	Logger *slog.Logger
	// Version is shown in the footer.
	Version string
	// OAuth, when set, accepts OAuth principals whose bearer tokens it
	// authenticates: a resource server over [auth.oauth] with only the
	// rules that grant the console (console = true). They use the whole
	// console, as [[auth.tokens]] with admin = true do.
	OAuth *auth.ResourceServer
	// Standalone says the console has its listener to itself (bub-mcp
	// console): / then leads to its pages too. Mounted on a serve it
	// answers only under Prefix.
	Standalone bool
}

// Prefix is where the console's pages are, whether bub-mcp console serves
// them or an HTTP serve mounts them beside /mcp: the same links work in
// both, and a mounted console claims nothing else of the serve's paths.
const Prefix = "/console"

// Console serves the pages. Close it to stop following the audit log.
type Console struct {
	o        Options
	a        *app.App
	mod      *Module
	queue    confirm.Queue
	ownQueue bool // made by New: Close closes it
	// auditPG is the PostgreSQL audit log's pool ([audit] store =
	// "postgres"); nil: the files in auditDir.
	auditPG  *pgxpool.Pool
	feed     *feed
	auditDir string
	log      *slog.Logger
	key      []byte // signs sessions and CSRF tokens; new each start
	tokens   []principal
	mux      *http.ServeMux

	verifyMu   sync.Mutex
	verified   *audit.Report
	verifyErr  error
	verifiedAt time.Time
	verifying  bool
}

// principal is who may use the console.
type principal struct {
	Name    string
	SHA256  string
	Admin   bool
	Profile string // the profile of an [[auth.tokens]] token
}

// viewer is who is looking at a page.
type viewer struct {
	// Name is for people: a token's name, an OAuth principal's display
	// name.
	Name string
	// ID is unique: a token's name, an OAuth principal's issuer#sub.
	ID    string
	Admin bool
	// Local is set for the person at a loopback console without tokens.
	Local bool
	// OAuth is set for an OAuth principal (a bearer token on every
	// request, no login to end).
	OAuth bool
	// Profile limits a non-admin's tools page.
	Profile string
}

// ErrNeedsAuth is New's error for a console that would listen beyond
// loopback with no token configured.
var ErrNeedsAuth = errors.New("console: refusing to serve beyond loopback without auth: add [[console.tokens]], [[auth.tokens]] with admin = true, or an [[auth.oauth.rules]] rule with console = true to bub.toml, or bind 127.0.0.1")

// New builds the console and starts following the audit log.
func New(o Options) (*Console, error) {
	if o.App == nil {
		return nil, errors.New("console: Options.App is required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	mod, ok := FromApp(o.App)
	if !ok {
		mod = &Module{MaxCalls: DefaultMaxCalls, Listen: DefaultListen}
	}
	c := &Console{o: o, a: o.App, mod: mod, queue: o.Queue, log: o.Logger, key: make([]byte, 32)}
	rand.Read(c.key)
	tokens, err := mod.principals(o.App.Config())
	if err != nil {
		return nil, err
	}
	c.tokens = tokens
	if !o.Loopback {
		admin := o.OAuth != nil
		for _, t := range c.tokens {
			admin = admin || t.Admin
		}
		if !admin {
			return nil, ErrNeedsAuth
		}
	}
	if c.queue == nil {
		q, err := confirm.QueueFor(o.App)
		if err != nil {
			return nil, err
		}
		c.queue, c.ownQueue = q, true
	}
	c.auditDir = o.AuditDir
	if c.auditDir == "" {
		c.auditDir = o.App.Home() + "/audit"
	}
	c.feed = newFeed(c.auditDir, mod.MaxCalls, o.PollInterval, c.log)
	if o.AuditDir == "" && auditInPostgres(o.App) {
		dsn := confirm.PostgresDSN(o.App)
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			if cl, ok := c.queue.(io.Closer); ok && c.ownQueue {
				cl.Close()
			}
			return nil, fmt.Errorf("console: audit log in postgres: %w", err)
		}
		c.auditPG = pool
		c.feed.pg = &pgTail{pool: pool, gaps: map[int64]time.Time{}}
	}
	c.feed.start()
	c.routes()
	return c, nil
}

// Close stops following the audit log and closes the approvals queue it
// opened.
func (c *Console) Close() error {
	c.feed.close()
	if c.auditPG != nil {
		c.auditPG.Close()
	}
	if cl, ok := c.queue.(io.Closer); ok && c.ownQueue {
		return cl.Close()
	}
	return nil
}

// Handler is the console's HTTP handler, with its security checks: its
// pages under Prefix (and / when Standalone); any other path is not
// found.
func (c *Console) Handler() http.Handler {
	var h http.Handler = c.mux
	h = c.securityHeaders(h)
	if c.o.Loopback {
		h = hostcheck.Handler(h, c.o.AllowedHosts, nil) // as serve does on loopback
	}
	return h
}

// cspPolicy allows nothing but the console's own scripts, styles, fetches
// and forms; no inline code, no framing.
const cspPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (c *Console) securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", cspPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: under no-referrer a browser
		// sends a plain form POST with Origin: null.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// sessionCookie holds a signed login: name, expiry, MAC.
const sessionCookie = "bub_console"

// sessionTTL is how long a login lasts.
const sessionTTL = 12 * time.Hour

func (c *Console) mac(parts ...string) string {
	m := hmac.New(sha256.New, c.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// needsLogin says whether requests must carry a token or a login.
func (c *Console) needsLogin() bool { return len(c.tokens) > 0 || c.o.OAuth != nil || !c.o.Loopback }

// errNoLogin is who's answer for a request with neither a bearer token
// nor a login cookie; errBadLogin for a token or cookie it refuses
// (OAuth refusals are *auth.Error, with their own status).
var (
	errNoLogin  = errors.New("unauthorized: log in with a console token")
	errBadLogin = errors.New("unauthorized: that token or login is not valid for the console")
)

// who finds the request's viewer: a bearer token (a console or
// [[auth.tokens]] token, else an OAuth access token the console's rules
// grant), a login cookie, or the local user of a loopback console
// without tokens.
func (c *Console) who(r *http.Request) (viewer, error) {
	if !c.needsLogin() {
		return viewer{Name: "local", ID: "local", Admin: true, Local: true}, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			if p, ok := c.byToken(strings.TrimSpace(tok)); ok {
				return viewer{Name: p.Name, ID: p.Name, Admin: p.Admin, Profile: p.Profile}, nil
			}
		}
		if c.o.OAuth == nil {
			return viewer{}, errBadLogin
		}
		// No rule without console = true is in this resource server:
		// a principal none of them matches is refused (403).
		p, err := c.o.OAuth.Authenticate(r.Context(), r)
		if err != nil {
			return viewer{}, err
		}
		return viewer{Name: p.Name, ID: p.ID(), Admin: true, OAuth: true}, nil
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return viewer{}, errNoLogin
	}
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 3 {
		return viewer{}, errBadLogin
	}
	name, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return viewer{}, errBadLogin
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || time.Now().Unix() > exp {
		return viewer{}, errBadLogin
	}
	if subtle.ConstantTimeCompare([]byte(c.mac("session", string(name), parts[1])), []byte(parts[2])) != 1 {
		return viewer{}, errBadLogin
	}
	for _, p := range c.tokens {
		if p.Name == string(name) {
			return viewer{Name: p.Name, ID: p.Name, Admin: p.Admin, Profile: p.Profile}, nil
		}
	}
	return viewer{}, errBadLogin
}

func (c *Console) byToken(tok string) (principal, bool) {
	if tok == "" {
		return principal{}, false
	}
	sum := sha256.Sum256([]byte(tok))
	got := []byte(hex.EncodeToString(sum[:]))
	for _, p := range c.tokens {
		if subtle.ConstantTimeCompare(got, []byte(p.SHA256)) == 1 {
			return p, true
		}
	}
	return principal{}, false
}

func (c *Console) sessionValue(name string) string {
	exp := strconv.FormatInt(time.Now().Add(sessionTTL).Unix(), 10)
	return base64.RawURLEncoding.EncodeToString([]byte(name)) + "." + exp + "." + c.mac("session", name, exp)
}

// csrfToken is the token every POST form of v's pages carries: a MAC of
// the viewer, which a page on another origin cannot read.
func (c *Console) csrfToken(v viewer) string { return c.mac("csrf", v.ID) }

// checkCSRF refuses a POST without the viewer's token, or from another
// origin. Origin "null" (an opaque origin: privacy settings, sandboxed
// frames) says nothing either way; the token decides.
func (c *Console) checkCSRF(r *http.Request, v viewer) error {
	if origin := r.Header.Get("Origin"); origin != "" && origin != "null" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("cross-origin request from %q refused", origin)
		}
	}
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		tok = r.PostFormValue("csrf")
	}
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(c.csrfToken(v))) != 1 {
		return errors.New("missing or wrong CSRF token: reload the page and try again")
	}
	return nil
}

// auditInPostgres says whether the servers write the audit log to the
// [store] database ([audit] store = "postgres").
func auditInPostgres(a *app.App) bool {
	var t struct {
		Store string `toml:"store"`
	}
	return a.Config().Decode("audit", &t) == nil && t.Store == "postgres" && confirm.PostgresDSN(a) != ""
}

// scanLog calls fn for every call at or after since, oldest first, until
// fn returns false: from the files, or from the audit table.
func (c *Console) scanLog(since time.Time, fn func(Call) bool) {
	if c.auditPG != nil {
		if err := pgScan(c.auditPG, since, fn); err != nil {
			c.log.Warn("console: audit scan", "error", err)
		}
		return
	}
	scanLog(c.auditDir, since, fn)
}

// auditReport is the chain check, run in the background at most every
// verifyEvery (it reads the whole log).
func (c *Console) auditReport() (*audit.Report, time.Time, error) {
	if c.auditPG != nil {
		return nil, time.Now(), errNoChainPG
	}
	c.verifyMu.Lock()
	defer c.verifyMu.Unlock()
	if !c.verifying && time.Since(c.verifiedAt) > verifyEvery {
		c.verifying = true
		done := make(chan struct{})
		go func() {
			defer close(done)
			rep, err := audit.Verify(c.auditDir)
			c.verifyMu.Lock()
			c.verified, c.verifyErr, c.verifiedAt, c.verifying = rep, err, time.Now(), false
			c.verifyMu.Unlock()
		}()
		// A first check of a small log is shown at once.
		c.verifyMu.Unlock()
		select {
		case <-done:
		case <-time.After(300 * time.Millisecond):
		}
		c.verifyMu.Lock()
	}
	return c.verified, c.verifiedAt, c.verifyErr
}

// verifyEvery bounds how often the console re-reads the whole log to
// check its chain.
const verifyEvery = 30 * time.Second
