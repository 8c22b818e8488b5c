package upstream

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client/transport"
)

// This file is auth = "token_exchange" (RFC 8693, within one trust
// domain): each call goes over its principal's own connection (the pool
// of oauthconn.go), whose requests carry a token the caller's issuer
// issued for this server alone, got by trading the caller's own access
// token (the one bub-mcp validated as resource server) at the issuer's
// token endpoint. The issuer is the one of the caller's token: the
// principal's (issuer#sub) issuer part, which is [auth.oauth] issuer,
// and its token endpoint comes from its RFC 8414 metadata (else its
// OpenID configuration). The caller's token goes to that endpoint only,
// never to the server. Exchanged tokens are kept in memory per principal
// until shortly before they expire, in a bounded LRU.

// RFC 8693 names.
const (
	grantTokenExchange   = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	// maxExchangeBody bounds a token endpoint's or metadata answer.
	maxExchangeBody = 64 << 10
	// exchangeMargin: an exchanged token is traded again this long before
	// it expires (or at half its life, when shorter), so no request
	// carries one about to lapse.
	exchangeMargin = 30 * time.Second
	// minExchangeCache is the least number of principals whose exchanged
	// tokens are kept per server (at least max_connections).
	minExchangeCache = 256
	// maxIssuers bounds the remembered token endpoints.
	maxIssuers = 16
)

// exchanged is one principal's exchanged token.
type exchanged struct {
	principal string
	token     string
	renew     time.Time // trade again from then on
	exp       time.Time
}

// exchangeCache is a server's exchanged tokens, per principal, least
// recently used first out.
type exchangeCache struct {
	mu        sync.Mutex
	order     *list.List // of *exchanged, most recent first
	byKey     map[string]*list.Element
	endpoints map[string]string // issuer → token endpoint
}

// get returns principal's token when it needs no renewal; with unexpired set,
// also an older one that has not expired (for the connection's requests
// between two calls).
func (c *exchangeCache) get(principal string, now time.Time, unexpired bool) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[principal]
	if !ok {
		return "", false
	}
	e := el.Value.(*exchanged)
	if !now.Before(e.exp) {
		c.order.Remove(el)
		delete(c.byKey, principal)
		return "", false
	}
	if !unexpired && !now.Before(e.renew) {
		return "", false
	}
	c.order.MoveToFront(el)
	return e.token, true
}

// put keeps e, evicting the least recently used beyond capacity.
func (c *exchangeCache) put(e *exchanged, capacity int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.order == nil {
		c.order, c.byKey = list.New(), map[string]*list.Element{}
	}
	if el, ok := c.byKey[e.principal]; ok {
		c.order.Remove(el)
	}
	c.byKey[e.principal] = c.order.PushFront(e)
	for c.order.Len() > capacity {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*exchanged).principal)
	}
}

// drop forgets principal's token (the server refused it).
func (c *exchangeCache) drop(principal string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[principal]; ok {
		c.order.Remove(el)
		delete(c.byKey, principal)
	}
}

// exchangeSession returns the caller's connection to u, trading the
// caller's token first when the principal has no fresh exchanged one.
func (u *upstream) exchangeSession(ctx context.Context, principal string, token registry.CallerToken) (*session, func(), error) {
	if principal == "" || !token.IsSet() {
		return nil, nil, &registry.Error{Kind: registry.KindConfig, Message: fmt.Sprintf(
			`upstream %s uses auth = "token_exchange": its calls act with the caller's own OAuth access token, and this caller has none `+
				`(a static token, stdio or the command line); connect over HTTP signed in with OAuth ([auth.oauth])`, u.cfg.name)}
	}
	if _, ok := u.exchange.get(principal, time.Now(), false); !ok {
		if err := u.exchangeToken(ctx, principal, token.Reveal()); err != nil {
			return nil, nil, err
		}
	}
	s, release, err := u.pooled(ctx, principal, func() (*session, error) { return u.connectExchanged(principal) })
	if err != nil && refused(err) {
		return nil, nil, u.exchangeRefused(principal, err)
	}
	return s, release, err
}

// exchangeRefused forgets principal's exchanged token, which the server
// refused (401), so that the next call trades again.
func (u *upstream) exchangeRefused(principal string, err error) error {
	u.exchange.drop(principal)
	u.pool.drop(principal)
	return &registry.Error{Kind: registry.KindTemporary,
		Message: fmt.Sprintf("upstream %s refused the exchanged token of %s (401); try the call again", u.cfg.name, principal), Cause: err}
}

// exchangeToken trades subject, principal's token, for one for u and
// keeps it.
func (u *upstream) exchangeToken(ctx context.Context, principal, subject string) error {
	fail := func(msg string, cause error) error {
		return &registry.Error{Kind: registry.KindTemporary, Message: fmt.Sprintf("upstream %s: token exchange: %s", u.cfg.name, msg), Cause: cause}
	}
	issuer, _, ok := strings.Cut(principal, "#")
	if !ok || issuer == "" {
		return fail(fmt.Sprintf("the principal %q names no issuer", principal), nil)
	}
	ctx, cancel := context.WithTimeout(ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	endpoint, err := u.tokenEndpoint(ctx, issuer)
	if err != nil {
		return fail(fmt.Sprintf("finding the token endpoint of %s: %v", issuer, err), err)
	}
	form := url.Values{
		"grant_type":         {grantTokenExchange},
		"subject_token":      {subject},
		"subject_token_type": {tokenTypeAccessToken},
		"resource":           {u.discoveryURL()},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fail(err.Error(), err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	res, err := u.httpClient().Do(req)
	if err != nil {
		return fail(fmt.Sprintf("%s: %v", endpoint, errors.Unwrap(err)), err)
	}
	defer res.Body.Close()
	var out struct {
		AccessToken     string   `json:"access_token"`
		IssuedTokenType string   `json:"issued_token_type"`
		TokenType       string   `json:"token_type"`
		ExpiresIn       *float64 `json:"expires_in"`
		Error           string   `json:"error"`
		Description     string   `json:"error_description"`
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxExchangeBody+1))
	if err == nil && len(body) > maxExchangeBody {
		err = fmt.Errorf("answer over %d bytes", maxExchangeBody)
	}
	if err == nil {
		err = json.Unmarshal(body, &out)
	}
	switch {
	case res.StatusCode != http.StatusOK && out.Error != "" && validErrorCode(out.Error):
		// The authorization server's own words, bounded, and without the
		// caller's token should they repeat it: the message reaches the
		// audit log and the logs.
		desc := clip(out.Description, 300)
		if strings.Contains(out.Description, subject) {
			desc = "its description repeats the caller's token, so it is not shown"
		}
		return fail(fmt.Sprintf("%s refused (%s: %s)", endpoint, out.Error, desc), nil)
	case res.StatusCode != http.StatusOK:
		return fail(fmt.Sprintf("%s answered %s", endpoint, res.Status), nil)
	case err != nil:
		return fail(fmt.Sprintf("%s: unreadable answer: %v", endpoint, err), err)
	case out.AccessToken == "" || !strings.EqualFold(out.TokenType, "Bearer"):
		return fail(fmt.Sprintf("%s issued no bearer access token", endpoint), nil)
	case out.IssuedTokenType != "" && out.IssuedTokenType != tokenTypeAccessToken:
		return fail(fmt.Sprintf("%s issued a %s, not an access token", endpoint, out.IssuedTokenType), nil)
	case out.ExpiresIn != nil && *out.ExpiresIn < 1:
		// The caller's own token is about to expire (an exchanged one
		// lives no longer): its client refreshes it first.
		return fail(fmt.Sprintf("%s issued a token that expires at once; the caller's token is expiring", endpoint), nil)
	}
	now := time.Now()
	life := time.Minute // no expiry given: trade again soon
	if out.ExpiresIn != nil {
		life = time.Duration(min(*out.ExpiresIn, 24*3600) * float64(time.Second))
	}
	e := &exchanged{principal: principal, token: out.AccessToken, exp: now.Add(life), renew: now.Add(life - min(exchangeMargin, life/2))}
	u.exchange.put(e, max(minExchangeCache, 2*u.cfg.MaxConnections))
	return nil
}

// clip bounds a string from outside for a message, never cutting a
// character in two (a broken byte would make the message invalid UTF-8).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// tokenEndpoint finds issuer's token endpoint from its RFC 8414 metadata,
// else its OpenID configuration, and remembers it.
func (u *upstream) tokenEndpoint(ctx context.Context, issuer string) (string, error) {
	u.exchange.mu.Lock()
	ep, ok := u.exchange.endpoints[issuer]
	u.exchange.mu.Unlock()
	if ok {
		return ep, nil
	}
	iu, err := url.Parse(issuer)
	if err != nil || (iu.Scheme != "https" && iu.Scheme != "http") || iu.Host == "" {
		return "", fmt.Errorf("not an http(s) issuer")
	}
	path := strings.TrimSuffix(iu.Path, "/")
	var errs []error
	for _, doc := range []string{
		iu.Scheme + "://" + iu.Host + "/.well-known/oauth-authorization-server" + path, // RFC 8414 §3.1
		strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration",
	} {
		ep, err := u.metadataEndpoint(ctx, doc, issuer)
		if err == nil {
			u.exchange.mu.Lock()
			if u.exchange.endpoints == nil || len(u.exchange.endpoints) >= maxIssuers {
				u.exchange.endpoints = map[string]string{}
			}
			u.exchange.endpoints[issuer] = ep
			u.exchange.mu.Unlock()
			return ep, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// metadataEndpoint reads the token endpoint from one metadata document,
// whose issuer must be issuer.
func (u *upstream) metadataEndpoint(ctx context.Context, doc, issuer string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, doc, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	res, err := u.httpClient().Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", doc, res.Status)
	}
	var md struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxExchangeBody)).Decode(&md); err != nil {
		return "", fmt.Errorf("%s: %w", doc, err)
	}
	if md.Issuer != issuer {
		return "", fmt.Errorf("%s names issuer %q, not %q", doc, md.Issuer, issuer)
	}
	if t, err := url.Parse(md.TokenEndpoint); err != nil || (t.Scheme != "https" && t.Scheme != "http") || t.Host == "" {
		return "", fmt.Errorf("%s: token_endpoint %q is not an http(s) URL", doc, md.TokenEndpoint)
	}
	return md.TokenEndpoint, nil
}

// connectExchanged connects to u as principal: every request carries the
// principal's current exchanged token.
func (u *upstream) connectExchanged(principal string) (*session, error) {
	hc := u.httpClient()
	hc.Transport = &exchangedAuth{next: hc.Transport, u: u, principal: principal}
	s, err := u.connectWith(u.ctx, nil, hc)
	if err != nil {
		if s != nil {
			u.stop(s)
		}
		return nil, hideURL(err, u.cfg.URL)
	}
	return u.listIfUnknown(s)
}

// exchangedAuth sets the Authorization header of a per-principal
// connection's requests to the principal's exchanged token: the newest
// the cache holds, else the last one it saw (an expired one gets a 401,
// and the next call trades again).
type exchangedAuth struct {
	next      http.RoundTripper
	u         *upstream
	principal string
	mu        sync.Mutex
	last      string
}

func (a *exchangedAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, ok := a.u.exchange.get(a.principal, time.Now(), true)
	a.mu.Lock()
	if ok {
		a.last = tok
	} else {
		tok = a.last
	}
	a.mu.Unlock()
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return a.next.RoundTrip(r)
}

// refused reports whether err is the server refusing a token (401).
func refused(err error) bool {
	var are *transport.AuthorizationRequiredError
	return errors.As(err, &are)
}

// listForCaller is a filter that changes no view: it lists the tools of
// each auth = "token_exchange" server that knows none (nothing
// remembered, never connected), in the background, as the first caller
// whose view is built with an OAuth token. Such a server has no identity
// of its own to list with; its tools appear with list_changed, and are
// remembered from then on.
func (m *Module) listForCaller(_ context.Context, conn *registry.Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
	if conn == nil || conn.Principal == "" || !conn.OAuthToken.IsSet() {
		return tools, "", nil
	}
	for _, u := range m.list() {
		if u.cfg.Auth != AuthTokenExchange {
			continue
		}
		u.mu.Lock()
		known := len(u.names) > 0 || u.closed
		u.mu.Unlock()
		if known || !u.listing.CompareAndSwap(false, true) {
			continue
		}
		principal, token := conn.Principal, conn.OAuthToken
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer u.listing.Store(false)
			ctx, cancel := context.WithTimeout(u.ctx, u.cfg.StartTimeout.Duration)
			defer cancel()
			_, release, err := u.exchangeSession(ctx, principal, token)
			if err != nil {
				m.log.Warn("upstream.tools.unlisted", "upstream", u.cfg.name, "principal", principal, "error", err)
				return
			}
			release()
		}()
	}
	return tools, "", nil
}
