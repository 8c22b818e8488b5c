package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// TestHealthzDetails checks who reads /healthz's details, which may hold a
// failing upstream's stderr: with tokens, a caller with a valid one; without,
// any caller of a loopback bind only. Everyone else learns ok or degraded.
// Without the check every caller read the details.
func TestHealthzDetails(t *testing.T) {
	const secret = "sk-live-0123456789"
	tokens := []streamhttp.Token{{Name: "ops", SHA256: config.HashToken("good"), Profile: "default"}}
	failing := func() streamhttp.Health {
		return streamhttp.Health{Degraded: true, Details: []string{"upstream broken: backoff, 0 tools, last error: exit status 3: " + secret}}
	}
	healthy := func() streamhttp.Health {
		return streamhttp.Health{Details: []string{"upstream fine: ready, 2 tools"}}
	}
	tests := []struct {
		name     string
		health   func() streamhttp.Health
		tokens   []streamhttp.Token
		loopback bool
		auth     string
		want     string
	}{
		{"tokens, none sent", failing, tokens, true, "", "degraded\n"},
		{"tokens, a wrong one", failing, tokens, true, "Bearer bad", "degraded\n"},
		{"tokens, a valid one", failing, tokens, true, "Bearer good", "degraded\nupstream broken: backoff, 0 tools, last error: exit status 3: " + secret + "\n"},
		{"tokens, healthy, none sent", healthy, tokens, false, "", "ok\n"},
		{"tokens, healthy, a valid one", healthy, tokens, false, "Bearer good", "ok\nupstream fine: ready, 2 tools\n"},
		{"no tokens, loopback bind", failing, nil, true, "", "degraded\nupstream broken: backoff, 0 tools, last error: exit status 3: " + secret + "\n"},
		{"no tokens, other bind", failing, nil, false, "", "degraded\n"},
		{"no tokens, other bind, a token sent", failing, nil, false, "Bearer good", "degraded\n"},
		{"nothing to report", nil, tokens, false, "Bearer good", "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, newHost(t, registry.New(), ""))
			handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}, Tokens: tt.tokens, Loopback: tt.loopback, Health: tt.health})
			ts := httptest.NewServer(handler)
			defer func() { closeSessions(context.Background()); ts.Close() }()
			req, _ := http.NewRequest(http.MethodGet, ts.URL+"/healthz", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d; want 200 (bub-mcp serves whatever its upstreams do)", resp.StatusCode)
			}
			if diff := cmp.Diff(tt.want, string(body)); diff != "" {
				t.Errorf("/healthz body (-want +got):\n%s", diff)
			}
		})
	}
}
