package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client/transport"
)

// newTestCredentials is a credentials on a file store under dir, with a
// key of its own.
func newTestCredentials(t *testing.T, dir string, key []byte) *credentials {
	t.Helper()
	c := &credentials{store: FileCredentialStore{Dir: dir}}
	var err error
	if c.seal, err = newSealer(key, credentialKeyInfo); err != nil {
		t.Fatal(err)
	}
	if c.state, err = newSealer(key, loginStateInfo); err != nil {
		t.Fatal(err)
	}
	return c
}

// Token sets are stored sealed, one file per (server, principal), mode
// 0600; a set opens only for its own principal and server and with the
// server's key; a refresh keeps the client; Principals and Delete.
func TestCredentialsFileStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := bytes.Repeat([]byte{7}, 32)
	c := newTestCredentials(t, dir, key)
	const secret = "alice-access-token-SECRET"
	set := &tokenSet{Token: transport.Token{AccessToken: secret, RefreshToken: "alice-refresh-SECRET", TokenType: "Bearer",
		ExpiresAt: time.Unix(2000000000, 0).UTC()}, ClientID: "client-1", ClientSecret: "client-secret-SECRET"}
	if err := c.save(ctx, "gh", "alice", set); err != nil {
		t.Fatal(err)
	}
	got, err := c.load(ctx, "gh", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(set, got); diff != "" {
		t.Errorf("load (-saved +loaded):\n%s", diff)
	}
	file := FileCredentialStore{Dir: dir}.file("gh", "alice")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{secret, "alice-refresh-SECRET", "client-secret-SECRET"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the credentials file holds %q in plaintext", s)
		}
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v; want 0600", fi.Mode().Perm())
	}

	// Bob has none; alice's sealed bytes put in bob's place do not open.
	if _, err := c.load(ctx, "gh", "bob"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("bob's set: %v; want ErrNoCredentials", err)
	}
	sealed, _ := c.store.Get(ctx, "gh", "alice")
	if err := c.store.Put(ctx, "gh", "bob", sealed); err != nil {
		t.Fatal(err)
	}
	if _, err := c.load(ctx, "gh", "bob"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("alice's set copied to bob: %v; want ErrNoCredentials", err)
	}
	if err := c.store.Put(ctx, "other", "alice", sealed); err != nil {
		t.Fatal(err)
	}
	if _, err := c.load(ctx, "other", "alice"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("alice's set copied to another server: %v; want ErrNoCredentials", err)
	}
	// Another key (a changed state_key) does not open it either.
	if _, err := newTestCredentials(t, dir, bytes.Repeat([]byte{8}, 32)).load(ctx, "gh", "alice"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("with another key: %v; want ErrNoCredentials", err)
	}

	// A refresh through the TokenStore keeps the client.
	ts := &principalTokens{c: c, server: "gh", principal: "alice"}
	if err := ts.SaveToken(ctx, &transport.Token{AccessToken: "fresh", RefreshToken: "r2"}); err != nil {
		t.Fatal(err)
	}
	got, _ = c.load(ctx, "gh", "alice")
	if got.Token.AccessToken != "fresh" || got.ClientID != "client-1" || got.ClientSecret != "client-secret-SECRET" {
		t.Errorf("after SaveToken: %+v", got)
	}
	if _, err := (&principalTokens{c: c, server: "gh", principal: "carol"}).GetToken(ctx); !errors.Is(err, transport.ErrNoToken) {
		t.Errorf("carol's GetToken: %v; want transport.ErrNoToken", err)
	}

	ps, err := c.store.Principals(ctx, "gh")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"alice", "bob"}, ps); diff != "" {
		t.Errorf("Principals (-want +got):\n%s", diff)
	}
	if found, err := c.store.Delete(ctx, "gh", "alice"); err != nil || !found {
		t.Errorf("Delete alice: %v %v", found, err)
	}
	if found, err := c.store.Delete(ctx, "gh", "alice"); err != nil || found {
		t.Errorf("Delete alice again: %v %v; want not found", found, err)
	}
	if _, err := c.load(ctx, "gh", "alice"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("after Delete: %v", err)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "gh", ".tmp-*")); len(entries) > 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// Login state is sealed, expires, opens only as its kind, and is single
// use.
func TestLoginState(t *testing.T) {
	c := newTestCredentials(t, t.TempDir(), bytes.Repeat([]byte{7}, 32))
	m := &Module{log: slog.New(slog.DiscardHandler)}
	ctx := t.Context()
	st := &loginState{Kind: "start", Server: "gh", Principal: "alice", Expires: time.Now().Add(time.Minute).Unix(), Nonce: newNonce()}
	link := c.sealState(st)
	if _, err := m.openState(ctx, c, "callback", link); err == nil {
		t.Error("a start state opened as a callback state")
	}
	got, err := m.openState(ctx, c, "start", link)
	if err != nil || got.Principal != "alice" || got.Server != "gh" {
		t.Fatalf("open: %+v %v", got, err)
	}
	if _, err := m.openState(ctx, c, "start", link); err == nil {
		t.Error("a used state opened again")
	}
	tampered := []byte(c.sealState(&loginState{Kind: "start", Server: "gh", Principal: "alice", Expires: time.Now().Add(time.Minute).Unix(), Nonce: newNonce()}))
	tampered[len(tampered)/2] ^= 1
	if _, err := m.openState(ctx, c, "start", string(tampered)); err == nil {
		t.Error("a tampered state opened")
	}
	old := c.sealState(&loginState{Kind: "start", Server: "gh", Principal: "alice", Expires: time.Now().Add(-time.Second).Unix(), Nonce: newNonce()})
	if _, err := m.openState(ctx, c, "start", old); err == nil {
		t.Error("an expired state opened")
	}
	other := newTestCredentials(t, t.TempDir(), bytes.Repeat([]byte{8}, 32))
	if _, err := m.openState(ctx, other, "start", c.sealState(&loginState{Kind: "start", Expires: time.Now().Add(time.Minute).Unix(), Nonce: newNonce()})); err == nil {
		t.Error("a state sealed with another key opened")
	}
}

// Two processes sharing a store whose copy of a principal's token ran out
// at once refresh it once: the other waits for the lock and reads the
// result. The authorization server rotates refresh tokens and refuses a
// reused one, as the front does.
func TestRefreshOnceAcrossProcesses(t *testing.T) {
	var mu sync.Mutex
	current, refreshes, reused := "r0", 0, 0
	mux := http.NewServeMux()
	var ts *httptest.Server
	mux.HandleFunc("/.well-known/", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/.well-known/oauth-authorization-server") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"response_types_supported":["code"]}`, ts.URL, ts.URL+"/authorize", ts.URL+"/token")
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		mu.Lock()
		defer mu.Unlock()
		if r.Form.Get("grant_type") != "refresh_token" || r.Form.Get("refresh_token") != current {
			reused++
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		refreshes++
		current = fmt.Sprintf("r%d", refreshes)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"a%d","token_type":"Bearer","expires_in":3600,"refresh_token":%q}`, refreshes, current)
	})
	ts = httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	dir, key := t.TempDir(), bytes.Repeat([]byte{7}, 32)
	first := newTestCredentials(t, dir, key)
	if err := first.save(context.Background(), "up", "alice", &tokenSet{ClientID: "c",
		Token: transport.Token{AccessToken: "a0", RefreshToken: "r0", TokenType: "Bearer", ExpiresAt: time.Now().Add(-time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	u := &upstream{cfg: &Server{name: "up", URL: ts.URL + "/mcp"}}
	var stores []*principalTokens
	for _, c := range []*credentials{first, newTestCredentials(t, dir, key)} { // two processes
		stores = append(stores, &principalTokens{c: c, server: "up", principal: "alice", log: slog.New(slog.DiscardHandler),
			refresh: u.refresher(transport.OAuthConfig{ClientID: "c", HTTPClient: ts.Client()})})
	}
	var wg sync.WaitGroup
	got := make([]string, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() {
			tok, err := stores[i%2].GetToken(context.Background())
			if err == nil {
				got[i] = tok.AccessToken
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != "a1" {
			t.Errorf("GetToken %d: %q %v; want a1", i, got[i], errs[i])
		}
	}
	if refreshes != 1 || reused != 0 {
		t.Errorf("%d refreshes, %d with a spent token; want 1 and 0", refreshes, reused)
	}
	set, _ := first.load(context.Background(), "up", "alice")
	if set.Token.RefreshToken != "r1" || set.ClientID != "c" {
		t.Errorf("stored after the refresh: %+v", set)
	}
}
