package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/pgtest"
)

// loginAS is an upstream that needs OAuth and its authorization server,
// enough for a sign-in: metadata, and a token endpoint that trades any
// code for a token (counting the trades).
type loginAS struct {
	url    string
	trades atomic.Int64
}

func newLoginAS(t *testing.T) *loginAS {
	t.Helper()
	as := &loginAS{}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/.well-known/oauth-authorization-server") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"response_types_supported":["code"],"code_challenge_methods_supported":["S256"]}`,
			as.url, as.url+"/authorize", as.url+"/token")
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("grant_type") != "authorization_code" {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"unsupported_grant_type"}`)
			return
		}
		n := as.trades.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"a%d","token_type":"Bearer","expires_in":3600}`, n)
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	as.url = ts.URL
	return as
}

// replica is one bub-mcp process's upstream module with its sign-in
// pages served at url.
type replica struct {
	m   *Module
	url string
}

func newReplica(t *testing.T, home, src string) *replica {
	t.Helper()
	m := upstreamModule(t, home, src)
	mux := http.NewServeMux()
	for pattern, handler := range m.LoginRoutes() {
		mux.Handle(pattern, handler)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	m.SetLoginBase(ts.URL)
	return &replica{m: m, url: ts.URL}
}

// get opens path (with its query) on r without following a redirect.
func (r *replica) get(t *testing.T, path string) (int, string, http.Header) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(r.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// A login link, and the state of the authorization callback it leads
// to, is good once across the replicas sharing a credential store (a
// $BUB_HOME, or PostgreSQL with a shared state_key): used on replica A,
// it is refused on replica B, and B trades no code for a token.
func TestLoginSingleUseAcrossReplicas(t *testing.T) {
	for _, store := range []string{"file", "postgres"} {
		t.Run(store, func(t *testing.T) {
			as := newLoginAS(t)
			src := fmt.Sprintf("[upstreams.up]\nurl = %q\nauth = \"oauth\"\nclient_id = \"c\"\n", as.url+"/mcp")
			homeA, homeB := t.TempDir(), ""
			if store == "postgres" {
				src = fmt.Sprintf("[store]\nkind = \"postgres\"\ndsn = %q\n\n[server]\nstate_key = \"a-state-key-the-replicas-share-0123456789\"\n\n", pgtest.DSN(t)) + src
				homeB = t.TempDir()
			} else {
				homeB = homeA // one machine: the replicas share $BUB_HOME
			}
			a, b := newReplica(t, homeA, src), newReplica(t, homeB, src)

			link, err := a.m.list()[0].loginLink("alice")
			if err != nil {
				t.Fatal(err)
			}
			path := strings.TrimPrefix(link, a.url)
			status, page, h := a.get(t, path)
			if status != http.StatusFound {
				t.Fatalf("the link on replica A: %d %s; want a redirect to the authorization server", status, page)
			}
			loc, err := url.Parse(h.Get("Location"))
			if err != nil || !strings.HasPrefix(h.Get("Location"), as.url+"/authorize") {
				t.Fatalf("redirect to %q; want the authorization endpoint", h.Get("Location"))
			}
			status, page, _ = b.get(t, path)
			if status != http.StatusBadRequest || !strings.Contains(page, "the link was already used") {
				t.Errorf("the same link on replica B: %d %s; want 400, already used", status, page)
			}

			callback := CallbackPath + "?code=x&state=" + url.QueryEscape(loc.Query().Get("state"))
			if status, page, _ := a.get(t, callback); status != http.StatusOK || !strings.Contains(page, "Signed in") {
				t.Fatalf("the callback on replica A: %d %s; want signed in", status, page)
			}
			status, page, _ = b.get(t, callback)
			if status != http.StatusBadRequest || !strings.Contains(page, "this sign-in response was already used") {
				t.Errorf("the same callback on replica B: %d %s; want 400, already used", status, page)
			}
			if n := as.trades.Load(); n != 1 {
				t.Errorf("%d codes traded for tokens; want 1", n)
			}
		})
	}
}

// The file store marks a nonce once across processes sharing its
// directory, purges marks past their expiry, and keeps at most
// MaxLoginsInFlight.
func TestFileStoreNonces(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s1, s2 := FileCredentialStore{Dir: dir}, FileCredentialStore{Dir: dir}
	later := time.Now().Add(time.Minute)
	if ok, err := s1.UseNonce(ctx, "n1", later); !ok || err != nil {
		t.Fatalf("first use: %v %v; want true", ok, err)
	}
	if ok, err := s2.UseNonce(ctx, "n1", later); ok || err != nil {
		t.Errorf("second use from another store: %v %v; want false", ok, err)
	}
	if ok, err := s1.UseNonce(ctx, "old", time.Now().Add(-2*time.Second)); !ok || err != nil {
		t.Fatalf("an expiring mark: %v %v", ok, err)
	}
	if ok, err := s2.UseNonce(ctx, "n2", later); !ok || err != nil {
		t.Fatalf("n2: %v %v", ok, err)
	}
	entries, err := os.ReadDir(s1.nonceDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("%d marks kept; want 2 (n1, n2: the expired one purged)", len(entries))
	}
	// Full: a new nonce is refused, a used one is still told used.
	exp := strconv.FormatInt(later.Unix(), 10)
	for i := range MaxLoginsInFlight - 2 {
		if err := os.WriteFile(filepath.Join(s1.nonceDir(), fmt.Sprintf("%s-fill%d", exp, i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s1.UseNonce(ctx, "n3", later); ok || !errors.Is(err, ErrTooManyLogins) {
		t.Errorf("a new nonce with %d marks: %v %v; want ErrTooManyLogins", MaxLoginsInFlight, ok, err)
	}
	if ok, err := s1.UseNonce(ctx, "n1", later); ok || err != nil {
		t.Errorf("a used nonce with the store full: %v %v; want false", ok, err)
	}
}

// nonceStore is a store whose UseNonce answers err.
type nonceStore struct {
	CredentialStore
	err error
}

func (s nonceStore) UseNonce(context.Context, string, time.Time) (bool, error) { return false, s.err }

// A login state whose nonce the store cannot mark is refused: with too
// many sign-ins in progress, saying so; with the store failing, without
// its error (which the log has).
func TestLoginStateStoreRefusals(t *testing.T) {
	m := &Module{log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrTooManyLogins, "too many sign-ins in progress"},
		{errors.New("credstore: dial tcp 10.0.0.7:5432: connection refused"), "bub-mcp cannot reach its credential store; try again later"},
	} {
		c := newTestCredentials(t, t.TempDir(), bytes.Repeat([]byte{7}, 32))
		c.store = nonceStore{CredentialStore: c.store, err: tc.err}
		link := c.sealState(&loginState{Kind: "start", Server: "gh", Principal: "alice", Expires: time.Now().Add(time.Minute).Unix(), Nonce: newNonce()})
		if _, err := m.openState(t.Context(), c, "start", link); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "10.0.0.7") {
			t.Errorf("store answering %v: %v; want %q", tc.err, err, tc.want)
		}
	}
}
