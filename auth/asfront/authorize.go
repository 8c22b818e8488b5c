package asfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// redirectMatches reports whether the redirect URI a request names is
// the registered one: the same string, or, for http on a loopback IP
// literal (127.0.0.1, [::1]), the same but for the port, which RFC 8252
// §7.3 (and OAuth 2.1) has the server accept whatever it is: a native
// client listens on a port the OS hands it at each sign-in. "localhost"
// is not such a literal (RFC 8252 §8.3) and matches exactly.
func redirectMatches(registered, requested string) bool {
	if registered == requested {
		return true
	}
	r, err1 := url.Parse(registered)
	q, err2 := url.Parse(requested)
	if err1 != nil || err2 != nil || r.Scheme != "http" || q.Scheme != "http" || !loopbackIP(r.Hostname()) || r.Hostname() != q.Hostname() {
		return false
	}
	r.Host, q.Host = r.Hostname(), q.Hostname()
	if strings.Contains(r.Host, ":") { // an IPv6 literal
		r.Host, q.Host = "["+r.Host+"]", "["+q.Host+"]"
	}
	return r.String() == q.String()
}

// loopbackIP reports whether host is a loopback IP literal.
func loopbackIP(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// pending is an authorization request between /authorize and the IdP's
// callback; consent adds the signed-in user while the consent page waits.
type pending struct {
	ClientID    string   `json:"client_id"`
	ClientName  string   `json:"client_name,omitempty"`
	RedirectURI string   `json:"redirect_uri"`
	State       string   `json:"state,omitempty"`
	Challenge   string   `json:"code_challenge"`
	Resource    string   `json:"resource"`
	Scopes      []string `json:"scopes"`
	// Upstream PKCE verifier and nonce of bub-mcp's own request.
	Verifier string `json:"verifier"`
	Nonce    string `json:"nonce"`
	// Set once the user signed in, for the consent page.
	Session *session `json:"session,omitempty"`
	CSRF    string   `json:"csrf,omitempty"`
}

// pageError answers an authorization request that cannot be sent back to
// the client (unknown client, unregistered redirect URI): RFC 6749 §4.1.2.1
// forbids redirecting then, so the user sees the error.
func (f *Front) pageError(w http.ResponseWriter, r *http.Request, e *oauthError) {
	f.opts.Logger.Info("oauth.proxy.refused", "path", r.URL.Path, "error", e.Code, "reason", e.Description, "cause", e.cause)
	securityHeaders(w, "")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(e.Status)
	_ = errorPage().Execute(w, e)
}

// redirectError sends an error back to the client's redirect URI, with
// its state and our iss (RFC 9207).
func (f *Front) redirectError(w http.ResponseWriter, r *http.Request, p *pending, e *oauthError) {
	f.opts.Logger.Info("oauth.proxy.refused", "path", r.URL.Path, "client_id", p.ClientID, "error", e.Code, "reason", e.Description, "cause", e.cause)
	q := url.Values{"error": {e.Code}, "error_description": {e.Description}}
	f.redirect(w, r, p, q)
}

func (f *Front) redirect(w http.ResponseWriter, r *http.Request, p *pending, q url.Values) {
	if p.State != "" {
		q.Set("state", p.State)
	}
	q.Set("iss", f.opts.Issuer)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, withQuery(p.RedirectURI, q), http.StatusFound)
}

// withQuery adds q to u, after the query u may already have (a
// registered redirect URI or the IdP's endpoint may carry one).
func withQuery(u string, q url.Values) string {
	if strings.Contains(u, "?") {
		return u + "&" + q.Encode()
	}
	return u + "?" + q.Encode()
}

// serveAuthorize checks an authorization request and sends the user to
// the IdP. Until the client and redirect URI are known good, errors are
// shown, not redirected.
func (f *Front) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k, vs := range q {
		if len(vs) > 1 {
			f.pageError(w, r, oerr(400, "invalid_request", "parameter "+k+" repeated", nil))
			return
		}
	}
	c, err := f.client(r.Context(), q.Get("client_id"))
	if err != nil {
		status := 400
		if !errors.Is(err, errUnknownClient) {
			status = 503
		}
		f.pageError(w, r, oerr(status, "invalid_client", "unknown client", err))
		return
	}
	ru := q.Get("redirect_uri")
	if ru == "" && len(c.RedirectURIs) == 1 {
		ru = c.RedirectURIs[0]
	}
	if !slices.ContainsFunc(c.RedirectURIs, func(reg string) bool { return redirectMatches(reg, ru) }) {
		f.pageError(w, r, oerr(400, "invalid_request", "redirect_uri is not registered for this client", nil))
		return
	}
	p := &pending{ClientID: c.ID, ClientName: c.Name, RedirectURI: ru, State: q.Get("state")}
	if len(p.State) > 1000 {
		f.pageError(w, r, oerr(400, "invalid_request", "state is too long", nil))
		return
	}
	if q.Get("response_type") != "code" {
		f.redirectError(w, r, p, oerr(400, "unsupported_response_type", "only response_type=code is supported", nil))
		return
	}
	p.Challenge = q.Get("code_challenge")
	if q.Get("code_challenge_method") != "S256" || len(p.Challenge) != 43 {
		f.redirectError(w, r, p, oerr(400, "invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256", nil))
		return
	}
	res := q.Get("resource")
	if res == "" {
		p.Resource = f.opts.DefaultResource
	} else if canon, ok := f.opts.Resource(res); ok {
		p.Resource = canon
	} else {
		f.redirectError(w, r, p, oerr(400, "invalid_target", "resource is not this server", nil))
		return
	}
	p.Scopes, err = f.scopes(q.Get("scope"))
	if err != nil {
		f.redirectError(w, r, p, oerr(400, "invalid_scope", err.Error(), nil))
		return
	}
	if n, err := f.opts.Store.Count(r.Context(), KindPending); err != nil || n >= maxPendingRecord {
		f.redirectError(w, r, p, oerr(503, "temporarily_unavailable", "too many sign-ins in progress", err))
		return
	}
	p.Verifier, p.Nonce = random(32), random(16)
	state := random(24)
	target, err := f.upstream.authorizeURL(r.Context(), f.opts.Issuer+CallbackPath, state, p.Nonce, p.Verifier)
	if err == nil {
		err = f.putJSON(r.Context(), KindPending, state, p, DefaultPendingTTL, "")
	}
	if err != nil {
		f.redirectError(w, r, p, oerr(503, "temporarily_unavailable", "the identity provider is unavailable", err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusFound)
}

// oidcScopes are scopes clients often ask for out of habit; they mean
// nothing for bub-mcp's tokens and are dropped rather than refused.
var oidcScopes = []string{"openid", "offline_access", "profile", "email"}

// scopes checks the requested scopes: each must be supported (the OIDC
// habits are dropped); none asks for all of them.
func (f *Front) scopes(s string) ([]string, error) {
	var out []string
	for _, sc := range strings.Fields(s) {
		switch {
		case slices.Contains(out, sc):
		case slices.Contains(f.opts.Scopes, sc):
			out = append(out, sc)
		case slices.Contains(oidcScopes, sc):
		default:
			return nil, errors.New("scope " + sc + " is not supported")
		}
	}
	if len(out) == 0 {
		return slices.Clone(f.opts.Scopes), nil
	}
	return out, nil
}

// serveCallback is where the IdP sends the user back: the code is
// exchanged, the ID token read, and the user either sees the consent page
// (first grant for this client) or goes straight back to the client.
func (f *Front) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var p pending
	rec, err := f.useJSON(r.Context(), KindPending, q.Get("state"), &p)
	if err != nil {
		f.pageError(w, r, oerr(400, "invalid_request", "unknown or used sign-in; start again from the client", err))
		return
	}
	if rec.Used || f.opts.Now().After(rec.Expires) {
		f.pageError(w, r, oerr(400, "invalid_request", "this sign-in was used or has expired; start again from the client", nil))
		return
	}
	if iss := q.Get("iss"); iss != "" && iss != f.upstream.opts.Issuer {
		// RFC 9207: an answer that names another issuer is a mix-up
		// (another IdP's code sent to this callback), never a sign-in.
		f.redirectError(w, r, &p, oerr(400, "access_denied", "the sign-in came back from another identity provider", fmt.Errorf("iss %q", iss)))
		return
	}
	if e := q.Get("error"); e != "" {
		f.redirectError(w, r, &p, oerr(400, "access_denied", "the identity provider refused the sign-in", errors.New(e)))
		return
	}
	claims, err := f.upstream.exchange(r.Context(), q.Get("code"), f.opts.Issuer+CallbackPath, p.Verifier, p.Nonce)
	if err != nil {
		f.redirectError(w, r, &p, oerr(502, "server_error", "the sign-in at the identity provider failed", err))
		return
	}
	sub, _ := claims["sub"].(string) // verified non-empty
	s := session{Subject: sub, Claims: map[string]any{}}
	for _, c := range f.opts.Claims {
		if v, ok := claims[c]; ok && !registered[c] {
			s.Claims[c] = v
		}
	}
	granted, err := f.granted(r.Context(), s.Subject, p.ClientID)
	if err != nil {
		f.redirectError(w, r, &p, oerr(503, "temporarily_unavailable", "the store is unavailable", err))
		return
	}
	if granted {
		f.issueCode(w, r, &p, s)
		return
	}
	p.Session, p.CSRF = &s, random(24)
	id := random(24)
	if err := f.putJSON(r.Context(), KindConsent, id, &p, DefaultPendingTTL, ""); err != nil {
		f.redirectError(w, r, &p, oerr(503, "temporarily_unavailable", "the store is unavailable", err))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: consentCookie, Value: p.CSRF, Path: f.cookiePath(), HttpOnly: true,
		Secure: strings.HasPrefix(f.opts.Issuer, "https://"), SameSite: http.SameSiteStrictMode, MaxAge: int(DefaultPendingTTL / time.Second)})
	securityHeaders(w, p.RedirectURI)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = consentPage().Execute(w, map[string]any{
		"Client": p.ClientName, "ClientID": p.ClientID, "RedirectURI": p.RedirectURI,
		"Scopes": strings.Join(p.Scopes, " "), "User": displayName(s), "ID": id, "CSRF": p.CSRF,
		"Action": f.opts.Issuer + ConsentPath,
	})
}

// registered claims are set by the front, never copied from the IdP: the
// IdP's scopes (scope, scp) must not add to what the client was granted.
var registered = map[string]bool{"iss": true, "sub": true, "aud": true, "exp": true, "nbf": true, "iat": true, "jti": true, "client_id": true, "scope": true, "scp": true, "azp": true}

func displayName(s session) string {
	for _, k := range []string{"email", "preferred_username", "name"} {
		if v, ok := s.Claims[k].(string); ok && v != "" {
			return v
		}
	}
	return s.Subject
}

// cookiePath is the consent form's path as the browser sees it (under the
// public URL's path, if any).
func (f *Front) cookiePath() string {
	u, err := url.Parse(f.opts.Issuer + ConsentPath)
	if err != nil {
		return ConsentPath
	}
	return u.Path
}

// grantKey hashes the pair: a subject may hold any character, and the
// PostgreSQL store's text keys no NUL.
func grantKey(sub, clientID string) string { return hash(sub + "\x00" + clientID) }

func (f *Front) granted(ctx context.Context, sub, clientID string) (bool, error) {
	_, err := f.opts.Store.Get(ctx, KindGrant, grantKey(sub, clientID))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// serveConsent takes the consent page's answer. The form's CSRF token
// must match the cookie set with the page and the stored request, so only
// the browser that signed in can approve.
func (f *Front) serveConsent(w http.ResponseWriter, r *http.Request) {
	form, e := readForm(w, r)
	if e != nil {
		f.pageError(w, r, e)
		return
	}
	var p pending
	rec, err := f.useJSON(r.Context(), KindConsent, form.Get("consent"), &p)
	if err != nil || rec.Used || f.opts.Now().After(rec.Expires) || p.Session == nil {
		f.pageError(w, r, oerr(400, "invalid_request", "unknown, used or expired consent request; start again from the client", err))
		return
	}
	cookie, _ := r.Cookie(consentCookie)
	if cookie == nil || form.Get("csrf") == "" || cookie.Value != p.CSRF || form.Get("csrf") != p.CSRF {
		f.pageError(w, r, oerr(403, "access_denied", "the consent form is not from this browser's sign-in", nil))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: consentCookie, Path: f.cookiePath(), MaxAge: -1})
	if form.Get("decision") != "approve" {
		f.redirectError(w, r, &p, oerr(400, "access_denied", "the user denied access", nil))
		return
	}
	if err := f.opts.Store.Create(r.Context(), KindGrant, grantKey(p.Session.Subject, p.ClientID), Record{Data: json.RawMessage(`{}`)}); err != nil && !errors.Is(err, ErrExists) {
		f.redirectError(w, r, &p, oerr(503, "temporarily_unavailable", "the store is unavailable", err))
		return
	}
	f.opts.Logger.Info("oauth.proxy.consent", "sub", p.Session.Subject, "client_id", p.ClientID)
	f.issueCode(w, r, &p, *p.Session)
}

// issueCode stores a fresh authorization code and sends it to the client.
func (f *Front) issueCode(w http.ResponseWriter, r *http.Request, p *pending, s session) {
	code := random(32)
	g := grantData{ClientID: p.ClientID, RedirectURI: p.RedirectURI, Challenge: p.Challenge, Resource: p.Resource, Scopes: p.Scopes, Session: s}
	if err := f.putJSON(r.Context(), KindCode, hash(code), g, f.opts.CodeTTL, random(16)); err != nil {
		f.redirectError(w, r, p, oerr(503, "temporarily_unavailable", "the store is unavailable", err))
		return
	}
	f.redirect(w, r, p, url.Values{"code": {code}})
}

// putJSON stores v as a new record expiring after ttl.
func (f *Front) putJSON(ctx context.Context, kind Kind, key string, v any, ttl time.Duration, family string) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.opts.Store.Create(ctx, kind, key, Record{Data: data, Family: family, Expires: f.opts.Now().Add(ttl)})
}

// useJSON marks the record used and decodes its payload into v.
func (f *Front) useJSON(ctx context.Context, kind Kind, key string, v any) (Record, error) {
	if key == "" || len(key) > 200 {
		return Record{}, ErrNotFound
	}
	rec, err := f.opts.Store.Use(ctx, kind, key)
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(rec.Data, v)
}

// securityHeaders: no scripts at all, no framing (clickjacking the
// consent button), forms only to us and, after the consent, a redirect
// to the client.
func securityHeaders(w http.ResponseWriter, redirectURI string) {
	formAction := "'self'"
	if redirectURI != "" {
		if u, err := url.Parse(redirectURI); err == nil {
			if u.Scheme == "http" || u.Scheme == "https" {
				formAction += " " + u.Scheme + "://" + u.Host
			} else {
				formAction += " " + u.Scheme + ":"
			}
		}
	}
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action "+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
}

// The pages are parsed on first use: most servers never show them, and
// parsing in init was part of every start.
var consentPage = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Allow {{.Client}}?</title></head>
<body>
<h1>Allow {{if .Client}}{{.Client}}{{else}}this application{{end}} to use bub-mcp?</h1>
<p>Signed in as <strong>{{.User}}</strong>.</p>
<dl>
<dt>Application</dt><dd>{{if .Client}}{{.Client}}{{else}}(no name){{end}}</dd>
<dt>Client ID</dt><dd><code>{{.ClientID}}</code></dd>
<dt>It will be sent to</dt><dd><code>{{.RedirectURI}}</code></dd>
<dt>Access</dt><dd><code>{{.Scopes}}</code></dd>
</dl>
<p>Only allow applications you started yourself. The answer is remembered for this application.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="consent" value="{{.ID}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" name="decision" value="approve">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
</body></html>
`))
})

var errorPage = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign-in failed</title></head>
<body><h1>Sign-in failed</h1><p><code>{{.Code}}</code>: {{.Description}}</p></body></html>
`))
})
