package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client/transport"
)

// This file is the per-principal connections of auth = "oauth" servers
// (and, through the pool, of auth = "token_exchange" ones): each
// principal's calls go over a connection of its own whose requests carry
// only that principal's token (never the client's own bearer token,
// which bub-mcp does not pass on). At most max_connections live at once:
// a new principal's connection closes the least recently used idle one,
// and one unused for idle_timeout is closed.

// principalConn is one principal's connection: connecting until ready is
// closed, then s (or err).
type principalConn struct {
	principal string
	ready     chan struct{}
	s         *session
	err       error
	active    int       // calls using it; guarded by the pool's mu
	lastUsed  time.Time // guarded by the pool's mu
}

// connPool is an upstream's per-principal connections.
type connPool struct {
	mu      sync.Mutex
	conns   map[string]*principalConn
	closed  bool
	reaping bool // the idle reaper runs
}

// drop closes principal's connection when no call uses it, so the next
// call connects again (after a sign-in, or a logout).
func (p *connPool) drop(principal string) {
	p.mu.Lock()
	pc := p.conns[principal]
	if pc == nil || pc.active > 0 || !isClosed(pc.ready) {
		p.mu.Unlock()
		return
	}
	delete(p.conns, principal)
	p.mu.Unlock()
	pc.stop()
}

// live counts the live connections.
func (p *connPool) live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// shut makes the pool take no more connections.
func (p *connPool) shut() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// closeAll closes every connection; the pool takes no more.
func (p *connPool) closeAll() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, pc := range conns {
		if isClosed(pc.ready) {
			pc.stop()
		}
	}
}

func (pc *principalConn) stop() {
	if pc.s != nil && pc.s.c != nil {
		pc.s.c.Close()
		pc.s.end(errors.New("closed"))
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// httpClient is the HTTP client of the server's connections and OAuth
// requests, with its response bodies bounded.
func (u *upstream) httpClient() *http.Client {
	return &http.Client{Transport: &boundedBodies{next: http.DefaultTransport, max: u.cfg.MaxMessageBytes, key: "upstreams." + u.cfg.name + ".max_message_bytes"}}
}

// principalSession returns principal's live connection to u, connecting
// it (with the principal's stored token set) when there is none; release
// must be called when the call is done. Without a token set, or when the
// server refuses the token and refreshing it fails, the error asks the
// principal to sign in.
//
// Over a live connection the token set is read once per request, by the
// request itself (principalTokens.GetToken), which is also what sees a
// logout made elsewhere (the request then fails with
// transport.ErrOAuthAuthorizationRequired, and the caller asks the
// principal to sign in): it is not read here as well.
func (u *upstream) principalSession(ctx context.Context, tc *registry.ToolContext, principal string) (*session, func(), error) {
	c, err := u.m.creds()
	if err != nil {
		return nil, nil, &registry.Error{Kind: registry.KindConfig, Message: fmt.Sprintf("upstream %s: %v", u.cfg.name, err)}
	}
	if s, release, ok := u.pool.take(principal); ok {
		return s, release, nil
	}
	set, err := c.load(ctx, u.cfg.name, principal)
	if errors.Is(err, ErrNoCredentials) {
		u.pool.drop(principal) // signed out elsewhere: its connection goes too
		if err := u.signIn(ctx, tc, principal); err != nil {
			return nil, nil, err
		}
		set, err = c.load(ctx, u.cfg.name, principal)
	}
	if err != nil {
		return nil, nil, &registry.Error{Kind: registry.KindTemporary, Message: fmt.Sprintf("upstream %s: reading the stored credentials: %v", u.cfg.name, err)}
	}
	s, release, err := u.pooled(ctx, principal, func() (*session, error) { return u.connectAs(principal, set, c) })
	if err != nil && errors.Is(err, transport.ErrOAuthAuthorizationRequired) {
		return nil, nil, u.loginRequired(principal)
	}
	return s, release, err
}

// pooled returns principal's live connection to u from the pool,
// connecting it with connect when there is none; release must be called
// when the call is done. A failed connection leaves the pool, and its
// error is wrapped (errors.Is finds the cause).
func (u *upstream) pooled(ctx context.Context, principal string, connect func() (*session, error)) (*session, func(), error) {
	p := &u.pool
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, &registry.Error{Kind: registry.KindTemporary, Message: fmt.Sprintf("upstream %s is shut down", u.cfg.name)}
	}
	if p.conns == nil {
		p.conns = map[string]*principalConn{}
	}
	pc := p.conns[principal]
	if pc != nil && isClosed(pc.ready) && (pc.err != nil || !pc.s.alive()) && pc.active == 0 {
		delete(p.conns, principal)
		go pc.stop()
		pc = nil
	}
	fresh := pc == nil
	if fresh {
		if len(p.conns) >= u.cfg.MaxConnections && !p.evictLocked() {
			p.mu.Unlock()
			return nil, nil, &registry.Error{Kind: registry.KindTemporary, Message: fmt.Sprintf(
				"upstream %s: all %d per-principal connections are busy (upstreams.%s.max_connections); try again shortly", u.cfg.name, u.cfg.MaxConnections, u.cfg.name)}
		}
		pc = &principalConn{principal: principal, ready: make(chan struct{})}
		p.conns[principal] = pc
		u.startReaper()
	}
	release := p.useLocked(pc)
	p.mu.Unlock()
	if fresh {
		pc.s, pc.err = connect()
		close(pc.ready)
	}
	select {
	case <-pc.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if pc.err != nil {
		release()
		u.pool.drop(principal)
		if errors.Is(pc.err, transport.ErrOAuthAuthorizationRequired) {
			return nil, nil, pc.err
		}
		return nil, nil, &registry.Error{Kind: registry.KindTemporary, Message: fmt.Sprintf("upstream %s: connecting as %s: %v", u.cfg.name, principal, pc.err), Cause: pc.err}
	}
	return pc.s, release, nil
}

// take returns principal's connection when it is connected and alive,
// in use until release is called.
func (p *connPool) take(principal string) (*session, func(), bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.conns[principal]
	if p.closed || pc == nil || !isClosed(pc.ready) || pc.err != nil || !pc.s.alive() {
		return nil, nil, false
	}
	return pc.s, p.useLocked(pc), true
}

// useLocked marks pc in use by one more call and returns what ends that
// use; p.mu is held.
func (p *connPool) useLocked(pc *principalConn) func() {
	pc.active++
	pc.lastUsed = time.Now()
	return func() {
		p.mu.Lock()
		pc.active--
		pc.lastUsed = time.Now()
		p.mu.Unlock()
	}
}

// evictLocked closes the least recently used idle connection; false when
// every one is in use or connecting.
func (p *connPool) evictLocked() bool {
	var lru *principalConn
	for _, pc := range p.conns {
		if pc.active == 0 && isClosed(pc.ready) && (lru == nil || pc.lastUsed.Before(lru.lastUsed)) {
			lru = pc
		}
	}
	if lru == nil {
		return false
	}
	delete(p.conns, lru.principal)
	go lru.stop()
	return true
}

// startReaper starts the idle reaper once; p.mu is held.
func (u *upstream) startReaper() {
	p := &u.pool
	if p.reaping {
		return
	}
	p.reaping = true
	idle := u.cfg.IdleTimeout.Duration
	u.m.wg.Add(1)
	go func() {
		defer u.m.wg.Done()
		t := time.NewTicker(max(idle/4, time.Second))
		defer t.Stop()
		for {
			select {
			case <-u.ctx.Done():
				p.closeAll()
				return
			case now := <-t.C:
				var stale []*principalConn
				p.mu.Lock()
				for k, pc := range p.conns {
					if pc.active == 0 && isClosed(pc.ready) && now.Sub(pc.lastUsed) >= idle {
						delete(p.conns, k)
						stale = append(stale, pc)
					}
				}
				p.mu.Unlock()
				for _, pc := range stale {
					pc.stop()
				}
			}
		}
	}()
}

// connectAs connects to u as principal, with its token set (refreshed
// when expired, through mcp-go), and lists the server's tools when none
// are known yet.
func (u *upstream) connectAs(principal string, set *tokenSet, c *credentials) (*session, error) {
	set = u.withClient(set)
	oc := u.oauthConfig("")
	oc.ClientID, oc.ClientSecret, oc.TokenEndpointAuthMethod = set.ClientID, set.ClientSecret, set.AuthMethod
	oc.TokenStore = &principalTokens{c: c, server: u.cfg.name, principal: principal, refresh: u.refresher(oc), log: u.m.log}
	s, err := u.connectWith(u.ctx, &oc, nil)
	if err != nil {
		if s != nil {
			u.stop(s)
		}
		return nil, hideURL(err, u.cfg.URL)
	}
	return u.listIfUnknown(s)
}

// withClient is set with its client's current secret: a configured
// client's from $client_secret_env now, so that a rotated secret serves
// every stored set (each keeps the secret it was issued with), a
// registered client's as stored with the set.
func (u *upstream) withClient(set *tokenSet) *tokenSet {
	if u.cfg.ClientSecretEnv == "" || set.ClientID != u.cfg.ClientID {
		return set
	}
	secret := u.m.app.Getenv(u.cfg.ClientSecretEnv)
	if secret == "" || secret == set.ClientSecret {
		return set
	}
	out := *set
	out.ClientSecret = secret
	return &out
}

// listIfUnknown lists the tools over a fresh per-principal connection s
// when none are known yet; a failed list ends s.
func (u *upstream) listIfUnknown(s *session) (*session, error) {
	u.mu.Lock()
	known := len(u.names) > 0
	u.mu.Unlock()
	if !known {
		lctx, cancel := context.WithTimeout(u.ctx, u.cfg.StartTimeout.Duration)
		raws, err := listTools(lctx, s, &u.seq)
		cancel()
		if err != nil {
			u.stop(s)
			return nil, hideURL(fmt.Errorf("tools/list: %w", err), u.cfg.URL)
		}
		if err := u.register(raws); err != nil {
			u.m.log.Error("upstream.tools.refused", "upstream", u.cfg.name, "error", err)
		} else {
			u.m.remember(u.cfg, raws)
			u.setState(StateReady, nil)
		}
	}
	return s, nil
}

// listAsAnyone lists the tools of an auth = "oauth" server that has none
// remembered, in the background, over the connection of the first
// principal with a stored token set that works (a replica with a
// $BUB_HOME of its own, sharing the sets in PostgreSQL, finds the list
// so). Without any, the server lists no tools until `bub-mcp login`.
func (u *upstream) listAsAnyone() {
	u.m.wg.Add(1)
	go func() {
		defer u.m.wg.Done()
		c, err := u.m.creds()
		if err != nil {
			u.m.log.Warn("upstream.tools.unlisted", "upstream", u.cfg.name, "error", err)
			return
		}
		ctx, cancel := context.WithTimeout(u.ctx, u.cfg.StartTimeout.Duration)
		defer cancel()
		who, err := c.store.Principals(ctx, u.cfg.name)
		if err != nil {
			u.m.log.Warn("upstream.tools.unlisted", "upstream", u.cfg.name, "error", err)
			return
		}
		for _, p := range who {
			_, release, err := u.principalSession(ctx, nil, p)
			if err == nil {
				release()
				return
			}
			u.m.log.Debug("upstream.tools.unlisted", "upstream", u.cfg.name, "principal", p, "error", err)
		}
		u.m.log.Warn("upstream.tools.unlisted", "upstream", u.cfg.name,
			"why", "no tool list is remembered and no stored sign-in works: run `bub-mcp login "+u.cfg.name+"`")
	}()
}

// refresher refreshes a principal's token with the OAuth client of its
// set (principalTokens.refresh): mcp-go's handler, made (with discovery
// guided by the server's 401, as at sign-in) at the first refresh, whose
// discovered metadata it keeps for the connection's life.
func (u *upstream) refresher(oc transport.OAuthConfig) func(context.Context, *tokenSet) (*transport.Token, error) {
	oc.TokenStore = transport.NewMemoryTokenStore() // the caller stores the result, sealed
	var once sync.Once
	var h *transport.OAuthHandler
	return func(ctx context.Context, set *tokenSet) (*transport.Token, error) {
		once.Do(func() { h = u.oauthHandler(ctx, oc) })
		tok, err := h.RefreshToken(ctx, set.Token.RefreshToken)
		return tok, hideURL(err, u.cfg.URL)
	}
}
