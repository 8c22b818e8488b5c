package cli_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/oidctest"
)

// TestHealthzHidesUpstreamStderr serves the built binary with a token and
// an upstream server that fails with a secret on its stderr: /healthz
// without the token says degraded and nothing more; with it, the details.
// Before, anyone read the upstream's stderr there.
func TestHealthzHidesUpstreamStderr(t *testing.T) {
	const secret = "sk-live-4f1c2e9a"
	src := "[profiles.default]\nworkspace = \"" + t.TempDir() + "\"\n" +
		"[[auth.tokens]]\nname = \"ops\"\nenv = \"HEALTH_TOKEN\"\nprofile = \"default\"\n" +
		"[upstreams.leaky]\ncommand = \"sh\"\nargs = [\"-c\", \"echo password=" + secret + " >&2; exit 3\"]\n"
	cfg := writeConfig(t, src)
	cmd := exec.Command(binary(t), "serve", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg, "HEALTH_TOKEN=tok-123")
	base := strings.TrimSuffix(serveHTTP(t, cmd), "/mcp")
	waitHealthDetails(t, base, "tok-123", secret)
	for _, token := range []string{"", "wrong"} {
		if got := getHealthz(t, base, token); got != "degraded\n" {
			t.Errorf("/healthz with token %q = %q; want \"degraded\\n\" only", token, got)
		}
	}
}

// getHealthz is base's /healthz body, with token as the bearer unless
// empty.
func getHealthz(t *testing.T, base, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/healthz", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// waitHealthDetails waits until /healthz, read with token, shows the
// failing upstream "leaky" and secret from its stderr: it fails soon
// after the start, and the details say so first.
func waitHealthDetails(t *testing.T, base, token, secret string) {
	t.Helper()
	var details string
	for deadline := time.Now().Add(20 * time.Second); ; {
		details = getHealthz(t, base, token)
		if strings.Contains(details, secret) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz with the token never showed the upstream's failure:\n%s", details)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.HasPrefix(details, "degraded\n") || !strings.Contains(details, "upstream leaky: ") {
		t.Errorf("/healthz with the token:\n%s\nwant degraded and the upstream's state", details)
	}
}

// TestHealthzDetailsNeedAValidOAuthToken is TestHealthzHidesUpstreamStderr
// with [auth.oauth] (Ory Hydra) and no static token: an OAuth access token
// valid for the server reads the details; none, one for another resource,
// one without the required scope or garbage reads "degraded" only.
func TestHealthzDetailsNeedAValidOAuthToken(t *testing.T) {
	const secret = "sk-live-77d0c3b5"
	idp := oidctest.Start(t)
	addr := freeAddr(t)
	public := "http://" + addr
	endpoint := public + "/mcp"
	src := fmt.Sprintf(`[server]
public_url = %q

[profiles.default]
workspace = %q

[auth.oauth]
issuer = %q
required_scopes = ["mcp"]

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "default"

[upstreams.leaky]
command = "sh"
args = ["-c", "echo password=%s >&2; exit 3"]
`, public, t.TempDir(), idp.Issuer, secret)
	cfg := writeConfig(t, src)
	cmd := exec.Command(binary(t), "serve", "--http", addr)
	cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg)
	serveHTTP(t, cmd)

	oauthClient := idp.NewClient(t, oidctest.ClientOptions{Audience: []string{endpoint, "https://other.example.com/mcp"}, Scopes: []string{"mcp"}})
	token := func(aud string, scopes ...string) string {
		return idp.Token(t, oauthClient, oidctest.TokenRequest{Subject: "alice", Scopes: scopes, Audience: []string{aud},
			Claims: map[string]any{"groups": []string{"eng"}}}).AccessToken
	}
	waitHealthDetails(t, public, token(endpoint, "mcp"), secret)
	for _, tc := range []struct{ name, token string }{
		{"no token", ""},
		{"a token for another resource", token("https://other.example.com/mcp", "mcp")},
		{"a token without the required scope", token(endpoint)},
		{"not a token", "garbage"},
	} {
		if got := getHealthz(t, public, tc.token); got != "degraded\n" {
			t.Errorf("/healthz with %s = %q; want \"degraded\\n\" only", tc.name, got)
		}
	}
}

// TestServeCORSFromConfig: [server] cors_origins reaches the HTTP
// transport, so the MCP Inspector's UI gets its preflight answered.
func TestServeCORSFromConfig(t *testing.T) {
	src := "[server]\ncors_origins = [\"http://localhost:6274\"]\n[profiles.default]\nworkspace = \"" + t.TempDir() + "\"\n"
	cfg := writeConfig(t, src)
	cmd := exec.Command(binary(t), "serve", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg)
	url := serveHTTP(t, cmd)
	for _, tt := range []struct {
		origin     string
		wantStatus int
		wantAllow  string
	}{
		{"http://localhost:6274", http.StatusNoContent, "http://localhost:6274"},
		{"http://localhost:9999", http.StatusMethodNotAllowed, ""},
	} {
		req, _ := http.NewRequest(http.MethodOptions, url, nil)
		req.Header.Set("Origin", tt.origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode != tt.wantStatus || got != tt.wantAllow {
			t.Errorf("preflight from %s = %d, Allow-Origin %q; want %d, %q", tt.origin, resp.StatusCode, got, tt.wantStatus, tt.wantAllow)
		}
	}
}
