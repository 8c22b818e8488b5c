package mcpserver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
)

// sessionServer serves HTTP with the session bounds given, the tokens
// named (each token's secret is its name) and an idle TTL.
func sessionServer(t *testing.T, l mcpserver.Limits, ttl time.Duration, tokens ...string) string {
	t.Helper()
	src := ""
	var toks []streamhttp.Token
	for _, name := range tokens {
		toks = append(toks, streamhttp.Token{Name: name, SHA256: config.HashToken(name), Profile: "default"})
	}
	h := newHost(t, registry.New(), src)
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Limits: l, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}, Tokens: toks, SessionIdleTTL: ttl})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	return ts.URL + "/mcp"
}

// opened is the answer to one initialize.
type opened struct {
	status     int
	session    string
	retryAfter string
	body       string
}

func initialize(t *testing.T, url, token, line string) opened {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(line))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return opened{resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), resp.Header.Get("Retry-After"), string(b)}
}

func endSession(t *testing.T, url, token, session string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE %s: %d", session, resp.StatusCode)
	}
}

// TestSessionLimits opens 2025 sessions up to [server] max_sessions and
// a principal's share: the next initialize gets 503 with Retry-After
// naming the key, and a slot freed by DELETE or the idle TTL serves the
// next one. Without the bounds every initialize got a session.
func TestSessionLimits(t *testing.T) {
	type step struct {
		token   string
		open    bool   // else end the session opened at index end
		end     int    // index into the sessions opened so far
		refused string // open: the key a 503 names; "" for a new session
	}
	tests := []struct {
		name   string
		limits mcpserver.Limits
		tokens []string
		steps  []step
	}{
		{"one address, its share", mcpserver.Limits{MaxSessions: 8}, nil, []step{ // share: 8/4
			{open: true}, {open: true},
			{open: true, refused: "max_sessions_per_principal"},
			{end: 0},
			{open: true},
			{open: true, refused: "max_sessions_per_principal"},
		}},
		{"tokens: shares and the total", mcpserver.Limits{MaxSessions: 4, MaxSessionsPerPrincipal: 3}, []string{"alice", "bob"}, []step{
			{token: "alice", open: true}, {token: "alice", open: true}, {token: "alice", open: true},
			{token: "alice", open: true, refused: "max_sessions_per_principal"},
			{token: "bob", open: true},
			{token: "bob", open: true, refused: "([server] max_sessions)"},
			{token: "alice", end: 1},
			{token: "bob", open: true},
			{token: "alice", open: true, refused: "([server] max_sessions)"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := sessionServer(t, tt.limits, 0, tt.tokens...)
			var sessions []string
			for i, s := range tt.steps {
				if !s.open {
					endSession(t, url, s.token, sessions[s.end])
					continue
				}
				got := initialize(t, url, s.token, initLine)
				switch {
				case s.refused == "" && (got.status != http.StatusOK || got.session == ""):
					t.Fatalf("step %d: initialize = %d %q, session %q; want a new session", i, got.status, got.body, got.session)
				case s.refused != "" && (got.status != http.StatusServiceUnavailable || got.retryAfter == "" || got.session != "" || !strings.Contains(got.body, s.refused)):
					t.Fatalf("step %d: initialize = %d %q, Retry-After %q, session %q; want 503 with Retry-After naming %s", i, got.status, got.body, got.retryAfter, got.session, s.refused)
				}
				sessions = append(sessions, got.session)
			}
		})
	}
}

// TestSessionLimitsByDefault: with nothing configured the sessions are
// still bounded: one address gets its share of DefaultMaxSessions (a
// quarter), and the next initialize is refused with 503 and Retry-After.
// Had zero meant "no bound", as it did before max_sessions, every
// initialize would get a session.
func TestSessionLimitsByDefault(t *testing.T) {
	url := sessionServer(t, mcpserver.Limits{}, 0)
	share := mcpserver.DefaultMaxSessions / 4
	for i := range share {
		if got := initialize(t, url, "", initLine); got.status != http.StatusOK || got.session == "" {
			t.Fatalf("initialize %d of the default share %d = %d %q; want a session", i+1, share, got.status, got.body)
		}
	}
	got := initialize(t, url, "", initLine)
	if got.status != http.StatusServiceUnavailable || got.retryAfter == "" || got.session != "" || !strings.Contains(got.body, "max_sessions_per_principal") {
		t.Errorf("initialize past the default share = %d %q, Retry-After %q, session %q; want 503 with Retry-After naming max_sessions_per_principal",
			got.status, got.body, got.retryAfter, got.session)
	}
}

// TestSessionLimitsFreedByIdleTTL: a session the client left is ended by
// session_idle_ttl, and its slot serves a new client.
func TestSessionLimitsFreedByIdleTTL(t *testing.T) {
	url := sessionServer(t, mcpserver.Limits{MaxSessions: 1}, 300*time.Millisecond)
	if got := initialize(t, url, "", initLine); got.session == "" {
		t.Fatalf("first initialize = %d %q", got.status, got.body)
	}
	if got := initialize(t, url, "", initLine); got.status != http.StatusServiceUnavailable {
		t.Fatalf("second initialize = %d; want 503 while the first session lives", got.status)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got := initialize(t, url, "", initLine)
		if got.session != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot 5 s after the idle TTL: %d %q", got.status, got.body)
		}
	}
}

// TestSessionSlotsNotHeldByRefusals: an initialize mcp-go refuses before
// making a session gives its slot back, and escaped spellings of the
// method are counted too.
func TestSessionSlotsNotHeldByRefusals(t *testing.T) {
	url := sessionServer(t, mcpserver.Limits{MaxSessions: 1}, 0)
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initLine))
		req.Header.Set("Content-Type", "text/plain")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("initialize as text/plain = %d; want 400", resp.StatusCode)
		}
	}
	escaped := strings.Replace(initLine, `"initialize"`, `"initi\u0061lize"`, 1)
	if got := initialize(t, url, "", escaped); got.session == "" {
		t.Fatalf("escaped initialize = %d %q; want a session (the slot is free)", got.status, got.body)
	}
	if got := initialize(t, url, "", escaped); got.status != http.StatusServiceUnavailable {
		t.Errorf("second escaped initialize = %d %q; want 503", got.status, got.body)
	}
}

// BenchmarkSessionMemory reports the heap one open 2025 session holds
// (initialize and notifications/initialized), which DefaultMaxSessions
// is sized by.
func BenchmarkSessionMemory(b *testing.B) {
	const n = 500
	h := newHost(b, registry.New(), "")
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler), Limits: mcpserver.Limits{MaxSessions: n, MaxSessionsPerPrincipal: n}})
	if err != nil {
		b.Fatal(err)
	}
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	defer closeSessions(context.Background())
	post := func(body, session string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		return w
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for b.Loop() {
		before := heap()
		var ids []string
		for range n {
			w := post(initLine, "")
			id := w.Header().Get("Mcp-Session-Id")
			if id == "" {
				b.Fatalf("initialize = %d %s", w.Code, w.Body)
			}
			post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, id)
			ids = append(ids, id)
		}
		b.ReportMetric(float64(heap()-before)/n, "heap-bytes/session")
		b.StopTimer()
		closeSessions(context.Background())
		runtime.KeepAlive(ids)
		b.StartTimer()
	}
}
