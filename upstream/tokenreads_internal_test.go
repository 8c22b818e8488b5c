package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client/transport"
)

// countingStore counts the token sets read from the store it wraps.
type countingStore struct {
	CredentialStore
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, server, principal string) ([]byte, error) {
	s.gets.Add(1)
	return s.CredentialStore.Get(ctx, server, principal)
}

// A call over a principal's live connection reads the principal's token
// set from the store once: the read that puts the token on the request,
// which is also what sees a logout made elsewhere.
func TestOneTokenReadPerCall(t *testing.T) {
	h := newOAuthHost(t, "", map[string]string{"p1": "tok-p1"})
	if _, err := h.call(t.Context(), "p1"); err != nil { // remembers the tool list
		t.Fatal(err)
	}
	// A second process on the same $BUB_HOME: with the list remembered,
	// nothing reads the store before its first call, so the counting
	// store goes in first.
	m := upstreamModule(t, h.m.app.Home(), fmt.Sprintf("[upstreams.up]\nurl = %q\nauth = \"oauth\"\n", h.u.cfg.URL))
	c, err := m.creds()
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingStore{CredentialStore: c.store}
	c.store = counting
	h = &oauthHost{m: m, u: m.list()[0]}
	if _, err := h.call(t.Context(), "p1"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		before := counting.gets.Load()
		if got, err := h.call(t.Context(), "p1"); err != nil || got != "echo: hi" {
			t.Fatalf("call: %q %v", got, err)
		}
		if n := counting.gets.Load() - before; n != 1 {
			t.Errorf("a call over a live connection read the token set %d times; want 1", n)
		}
	}
}

// elicitPeer is a client that takes URL-mode elicitation: its user
// accepts, and signIn (run then) stands for the sign-in at the link.
type elicitPeer struct {
	urls   []string
	signIn func()
}

func (p *elicitPeer) Progress(context.Context, float64, float64, string) {}
func (p *elicitPeer) Log(context.Context, slog.Level, string, any)       {}
func (p *elicitPeer) Sample(context.Context, registry.SampleRequest) (*registry.SampleResult, error) {
	return nil, errors.New("no sampling")
}
func (p *elicitPeer) CanElicitURL(context.Context) bool { return true }
func (p *elicitPeer) Elicit(_ context.Context, req registry.ElicitRequest) (*registry.ElicitResult, error) {
	p.urls = append(p.urls, req.URL)
	p.signIn()
	return &registry.ElicitResult{Action: "accept"}, nil
}

// A principal signed out elsewhere while its connection is live (so the
// call's own request is what finds the token gone) is asked to sign in
// as one without a connection is: a client that takes URL elicitation
// is sent to the login link, and once the user has signed in the call
// goes on, over a new connection.
func TestSignedOutOnLiveConnection(t *testing.T) {
	h := newOAuthHost(t, "", map[string]string{"p1": "tok-p1"})
	h.m.SetLoginBase("http://127.0.0.1:1")
	ctx := t.Context()
	if _, err := h.call(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	h.signOutLive(t, "p1")
	c, _ := h.m.creds()
	peer := &elicitPeer{signIn: func() {
		if err := c.save(ctx, "up", "p1", &tokenSet{Token: transport.Token{AccessToken: "tok-p1", TokenType: "Bearer"}, ClientID: "c"}); err != nil {
			t.Error(err)
		}
		h.m.signalLogin()
	}}
	tc := &registry.ToolContext{Conn: &registry.Connection{Principal: "p1"}, Peer: peer}
	v, err := h.u.call(ctx, tc, "echo", []byte(`{"text":"again"}`))
	if err != nil {
		t.Fatalf("the call after signing in again: %v", err)
	}
	if got := v.(*Result).text; got != "echo: again" {
		t.Errorf("call: %q", got)
	}
	if len(peer.urls) != 1 || !strings.HasPrefix(peer.urls[0], "http://127.0.0.1:1/upstreams/up/login?state=") {
		t.Errorf("elicitations %q; want one, of the login link", peer.urls)
	}
}

// A resource read of a principal signed out elsewhere while its
// connection is live asks it to sign in, and its connection goes.
func TestReadSignedOutOnLiveConnection(t *testing.T) {
	h := newOAuthHost(t, "start_timeout = \"5s\"\n", map[string]string{"p1": "tok-p1"})
	ctx := t.Context()
	conn := &registry.Connection{Principal: "p1"}
	req := mcpserver.ReadRequest{URI: "ui://up/widget/app.html"}
	if _, err := h.m.read(ctx, conn, req); err != nil {
		t.Fatal(err)
	}
	h.signOutLive(t, "p1")
	if _, err := h.m.read(ctx, conn, req); err == nil || !strings.Contains(err.Error(), "bub-mcp login up") {
		t.Errorf("read after logout: %v; want a sign-in request", err)
	}
	if h.has("p1") {
		t.Error("p1's connection outlived its logout")
	}
}
