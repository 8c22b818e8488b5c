package upstream

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestExchangeCache: a token is reused until its renewal time, still
// sent (any) until it expires, and the least recently used principal
// goes first beyond capacity.
func TestExchangeCache(t *testing.T) {
	var c exchangeCache
	now := time.Now()
	c.put(&exchanged{principal: "a", token: "ta", renew: now.Add(time.Minute), exp: now.Add(2 * time.Minute)}, 2)
	c.put(&exchanged{principal: "b", token: "tb", renew: now.Add(time.Minute), exp: now.Add(2 * time.Minute)}, 2)
	if tok, ok := c.get("a", now, false); !ok || tok != "ta" {
		t.Fatalf("get(a) = %q, %v; want ta", tok, ok)
	}
	later := now.Add(90 * time.Second) // past renewal, before expiry
	if _, ok := c.get("a", later, false); ok {
		t.Errorf("a token due for renewal was reused")
	}
	if tok, ok := c.get("a", later, true); !ok || tok != "ta" {
		t.Errorf("get(a, any) before expiry = %q, %v; want ta", tok, ok)
	}
	if _, ok := c.get("a", now.Add(2*time.Minute), true); ok {
		t.Errorf("an expired token was returned")
	}
	// a is gone (expired); b, then c, then d: b is the least recently used.
	c.put(&exchanged{principal: "c", token: "tc", renew: now.Add(time.Minute), exp: now.Add(2 * time.Minute)}, 2)
	c.get("b", now, false)
	c.put(&exchanged{principal: "d", token: "td", renew: now.Add(time.Minute), exp: now.Add(2 * time.Minute)}, 2)
	for p, want := range map[string]bool{"b": true, "c": false, "d": true} {
		if _, ok := c.get(p, now, false); ok != want {
			t.Errorf("after eviction, %s cached = %v; want %v", p, ok, want)
		}
	}
	c.drop("b")
	if _, ok := c.get("b", now, true); ok {
		t.Errorf("a dropped token was returned")
	}
}

// exchangeHost is an App whose upstream "up" (auth = "token_exchange") is
// an in-process MCP server accepting "Bearer up-<sub>", with an
// authorization server that trades "subj-<sub>" for "up-<sub>".
type exchangeHost struct {
	u         *upstream
	issuer    string
	mu        sync.Mutex
	seen      map[string]int // Authorization headers at the MCP server
	exchanges []url.Values   // token requests
}

func newExchangeHost(t *testing.T) *exchangeHost {
	t.Helper()
	h := &exchangeHost{seen: map[string]int{}}
	s := server.NewMCPServer("exchange-upstream", "1")
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo: " + req.GetString("text", "")), nil
	})
	inner := server.NewStreamableHTTPServer(s, server.WithStateful(true))
	mcpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		h.mu.Lock()
		h.seen[auth]++
		h.mu.Unlock()
		if !strings.HasPrefix(auth, "Bearer up-") || strings.HasSuffix(auth, "-revoked") {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(mcpSrv.Close)
	var as *httptest.Server
	as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			fmt.Fprintf(w, `{"issuer":%q,"token_endpoint":%q}`, as.URL, as.URL+"/token")
		case "/token":
			r.ParseForm()
			h.mu.Lock()
			h.exchanges = append(h.exchanges, r.PostForm)
			h.mu.Unlock()
			if subj := r.PostForm.Get("subject_token"); strings.HasPrefix(subj, "echo-") {
				w.WriteHeader(400)
				fmt.Fprintf(w, `{"error":"invalid_grant","error_description":"token %s is not a token of mine"}`, subj)
				return
			}
			sub, ok := strings.CutPrefix(r.PostForm.Get("subject_token"), "subj-")
			if !ok || r.PostForm.Get("grant_type") != grantTokenExchange || r.PostForm.Get("subject_token_type") != tokenTypeAccessToken ||
				r.PostForm.Get("resource") != mcpSrv.URL+"/mcp" {
				w.WriteHeader(400)
				fmt.Fprint(w, `{"error":"invalid_grant","error_description":"not a token of mine"}`)
				return
			}
			life := 300
			if strings.HasSuffix(sub, "-expiring") {
				life = 0
			}
			fmt.Fprintf(w, `{"access_token":"up-%s","issued_token_type":%q,"token_type":"Bearer","expires_in":%d}`, sub, tokenTypeAccessToken, life)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(as.Close)
	h.issuer = as.URL
	home := t.TempDir()
	src := "[upstreams.up]\nurl = \"" + mcpSrv.URL + "/mcp\"\nauth = \"token_exchange\"\n"
	m := upstreamModule(t, home, src)
	h.u = m.list()[0]
	return h
}

func (h *exchangeHost) call(ctx context.Context, sub, token string) (string, error) {
	conn := &registry.Connection{Principal: h.issuer + "#" + sub, OAuthToken: registry.NewCallerToken(token)}
	v, err := h.u.call(ctx, &registry.ToolContext{Conn: conn}, "echo", []byte(`{"text":"hi"}`))
	if err != nil {
		return "", err
	}
	return v.(*Result).text, nil
}

// TestTokenExchangeCalls: each principal's calls carry the token its own
// token was exchanged for (once, then from the cache), never the caller's
// token; a refused exchange, a refused exchanged token and a caller
// without a token end in clear errors that carry no token.
func TestTokenExchangeCalls(t *testing.T) {
	h := newExchangeHost(t)
	ctx := t.Context()
	for _, who := range []string{"alice", "alice", "bob", "alice"} {
		if got, err := h.call(ctx, who, "subj-"+who); err != nil || got != "echo: hi" {
			t.Fatalf("%s's call: %q %v", who, got, err)
		}
	}
	h.mu.Lock()
	if n := len(h.exchanges); n != 2 {
		t.Errorf("%d token exchanges for two principals; want 2 (then the cache)", n)
	}
	for auth := range h.seen {
		if auth != "Bearer up-alice" && auth != "Bearer up-bob" {
			t.Errorf("the upstream got Authorization %q", auth)
		}
	}
	h.mu.Unlock()

	_, err := h.call(ctx, "carol", "")
	if err == nil || !strings.Contains(err.Error(), `upstream up uses auth = "token_exchange": its calls act with the caller's own OAuth access token, and this caller has none`) {
		t.Errorf("a call without a token: %v; want the clear error", err)
	}
	_, err = h.call(ctx, "mallory", "stolen-secret-token")
	if err == nil || !strings.Contains(err.Error(), "/token refused (invalid_grant: not a token of mine)") || strings.Contains(err.Error(), "stolen-secret-token") {
		t.Errorf("a refused exchange: %v; want the authorization server's refusal, without the token", err)
	}
	// An authorization server that repeats the token in its refusal:
	// the refusal is shown without it.
	_, err = h.call(ctx, "trent", "echo-secret-token")
	if err == nil || !strings.Contains(err.Error(), "/token refused (invalid_grant: ") || strings.Contains(err.Error(), "echo-secret-token") {
		t.Errorf("a refusal repeating the token: %v; want the refusal, without the token", err)
	}
	_, err = h.call(ctx, "erin", "subj-erin-expiring")
	if err == nil || !strings.Contains(err.Error(), "issued a token that expires at once") {
		t.Errorf("an exchanged token with no life left: %v; want an error", err)
	}
	// An exchanged token the server refuses is forgotten: the next call
	// trades again.
	h.mu.Lock()
	before := len(h.exchanges)
	h.mu.Unlock()
	for range 2 {
		_, err = h.call(ctx, "dave", "subj-dave-revoked")
		if err == nil || strings.Contains(err.Error(), "subj-dave") {
			t.Errorf("a call with a refused exchanged token: %v; want an error without the token", err)
		}
	}
	h.mu.Lock()
	if n := len(h.exchanges) - before; n != 2 {
		t.Errorf("%d exchanges for two calls whose exchanged token was refused; want 2", n)
	}
	h.mu.Unlock()
}

// clip cuts at a byte bound without leaving half a character.
func TestClipKeepsUTF8(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"ab漢字", 3, "ab…"}, // 漢 is 3 bytes: cut inside it, dropped whole
		{"ab漢字", 5, "ab漢…"},
	} {
		if got := clip(tt.in, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d) = %q; want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
