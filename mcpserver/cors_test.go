package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// TestCORS lets the pages of configured origins call the server from a
// browser: their preflights are answered (they carry no token), and their
// responses, refusals included, are readable. Other origins meet the
// checks as before: refused on a loopback bind unless local, and an
// OPTIONS gets 405. Without cors_origins a configured origin's preflight
// got 401 and its POST 403.
func TestCORS(t *testing.T) {
	const inspector, remote = "http://localhost:6274", "https://inspector.example.com"
	h := newHost(t, registry.New(), "")
	srv := newServer(t, h)
	handler, closeSessions := httpHandler(srv, streamhttp.Options{
		Profiles:    []string{"default"},
		Tokens:      []streamhttp.Token{{Name: "ui", SHA256: config.HashToken("secret"), Profile: "default"}},
		CheckHosts:  true,
		CORSOrigins: []string{inspector, remote},
	})
	ts := httptest.NewServer(handler)
	defer func() { closeSessions(context.Background()); ts.Close() }()

	preflight := map[string]string{
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
	}
	post := map[string]string{
		"Authorization": "Bearer secret",
		"Content-Type":  "application/json",
		"Accept":        "application/json, text/event-stream",
	}
	allowed := func(origin string) map[string]string {
		return map[string]string{
			"Access-Control-Allow-Origin":  origin,
			"Access-Control-Allow-Methods": "GET, POST, DELETE",
			"Access-Control-Allow-Headers": "Content-Type, Authorization, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name",
			"Access-Control-Max-Age":       "600",
		}
	}
	readable := func(origin string) map[string]string {
		return map[string]string{"Access-Control-Allow-Origin": origin, "Access-Control-Expose-Headers": "Mcp-Session-Id, WWW-Authenticate, Retry-After"}
	}
	tests := []struct {
		name, method, origin string
		header               map[string]string
		body                 string
		wantStatus           int
		wantCORS             map[string]string // the Access-Control-* headers
	}{
		{"preflight from the inspector", http.MethodOptions, inspector, preflight, "", http.StatusNoContent, allowed(inspector)},
		{"preflight from a configured remote origin", http.MethodOptions, remote, preflight, "", http.StatusNoContent, allowed(remote)},
		{"preflight from another remote origin", http.MethodOptions, "https://evil.example", preflight, "", http.StatusForbidden, map[string]string{}},
		{"preflight from another local origin", http.MethodOptions, "http://localhost:9999", preflight, "", http.StatusUnauthorized, map[string]string{}},
		{"OPTIONS from another local origin with the token", http.MethodOptions, "http://localhost:9999", map[string]string{"Authorization": "Bearer secret"}, "", http.StatusMethodNotAllowed, map[string]string{}},
		{"POST from the inspector", http.MethodPost, inspector, post, initLine, http.StatusOK, readable(inspector)},
		{"POST from a configured remote origin", http.MethodPost, remote, post, initLine, http.StatusOK, readable(remote)},
		{"POST from the inspector without the token", http.MethodPost, inspector, map[string]string{"Content-Type": "application/json"}, initLine, http.StatusUnauthorized, readable(inspector)},
		{"POST from another remote origin", http.MethodPost, "https://evil.example", post, initLine, http.StatusForbidden, map[string]string{}},
		{"POST from a configured origin's other port", http.MethodPost, "https://inspector.example.com:8443", post, initLine, http.StatusForbidden, map[string]string{}},
		{"healthz from the inspector", http.MethodGet, inspector, nil, "", http.StatusOK, readable(inspector)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, ts.URL+"/mcp", strings.NewReader(tt.body))
			if tt.method == http.MethodGet {
				req.URL.Path = "/healthz"
			}
			req.Header.Set("Origin", tt.origin)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d; want %d", resp.StatusCode, tt.wantStatus)
			}
			got := map[string]string{}
			for k := range resp.Header {
				if strings.HasPrefix(k, "Access-Control-") {
					got[k] = resp.Header.Get(k)
				}
			}
			if diff := cmp.Diff(tt.wantCORS, got); diff != "" {
				t.Errorf("CORS headers (-want +got):\n%s", diff)
			}
		})
	}
}
