package cli_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bubbuild/bub-mcp/internal/oidctest"
)

// TestConsoleOAuth: with [auth.oauth] configured, an [[auth.oauth.rules]]
// rule with console = true lets its principals use the console mounted on
// serve (and bub-mcp console) with their bearer JWT, from a real OpenID
// provider (Ory Hydra); refused: no token (the login page, or 401), a
// token for another resource (401), a principal no console rule matches
// (403). The calls table and a call's page show an OAuth caller as issuer
// and subject.
func TestConsoleOAuth(t *testing.T) {
	idp := oidctest.Start(t)
	addr := freeAddr(t)
	public := "http://" + addr
	endpoint := public + "/mcp"
	ws, home := noteWorkspace(t, "from the workspace\n"), t.TempDir()
	src := fmt.Sprintf(`[server]
public_url = %q

[console]
enabled = true

[profiles.default]
workspace = %q

[auth.oauth]
issuer = %q
name_claim = "email"

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "default"

[[auth.oauth.rules]]
claim = "groups"
value = "ops"
profile = "default"
console = true
`, public, ws, idp.Issuer)
	cfg := writeConfig(t, src)
	env := append(os.Environ(), "BUB_HOME="+home, "BUB_CONFIG="+cfg)
	cmd := exec.Command(binary(t), "serve", "--http", addr)
	cmd.Env = env
	serveHTTP(t, cmd)

	oauthClient := idp.NewClient(t, oidctest.ClientOptions{Audience: []string{endpoint, "https://other.example.com/mcp"}})
	token := func(sub, group, aud string) string {
		claims := map[string]any{"groups": []string{group}, "email": sub + "@example.com", "email_verified": true}
		return idp.Token(t, oauthClient, oidctest.TokenRequest{Subject: sub, Audience: []string{aud}, Claims: claims}).AccessToken
	}
	alice := token("alice", "eng", endpoint)                           // uses the tools, not the console
	olga := token("olga", "ops", endpoint)                             // the console's
	elsewhere := token("olga", "ops", "https://other.example.com/mcp") // right person, wrong resource

	// alice makes a call, which the console shows as hers.
	tr, err := transport.NewStreamableHTTP(endpoint, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + alice}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "fs_read"
	req.Params.Arguments = map[string]any{"path": "note.txt"}
	if res, err := c.CallTool(t.Context(), req); err != nil || res.IsError {
		t.Fatalf("fs_read: %v %+v", err, res)
	}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(t *testing.T, method, u, bearer string, form url.Values) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, u, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	challenge := `Bearer resource_metadata="` + public + `/.well-known/oauth-protected-resource/mcp"`
	for _, base := range []string{public + "/console", startConsole(t, env)} {
		t.Run(base, func(t *testing.T) {
			for _, tc := range []struct {
				name, path, bearer string
				status             int
				www                string // WWW-Authenticate, when the refusal has one
			}{
				{"no token: a page leads to the login", "/calls", "", http.StatusSeeOther, ""},
				{"no token: a page's part is refused", "/approvals/list", "", http.StatusUnauthorized, `Bearer realm="bub-mcp console"`},
				{"token for another resource", "/calls", elsewhere, http.StatusUnauthorized, challenge + `, error="invalid_token", error_description="token is for another resource"`},
				{"principal without the console grant", "/calls", alice, http.StatusForbidden, ""},
				{"not a token", "/calls", "garbage", http.StatusUnauthorized, challenge + `, error="invalid_token", error_description="unsupported token format"`},
				{"principal with the console grant", "/approvals/list", olga, http.StatusOK, ""},
			} {
				res, body := do(t, http.MethodGet, base+tc.path, tc.bearer, nil)
				if res.StatusCode != tc.status || res.Header.Get("WWW-Authenticate") != tc.www {
					t.Errorf("%s: GET %s = %d, WWW-Authenticate %q; want %d, %q (body %.200s)", tc.name, tc.path, res.StatusCode, res.Header.Get("WWW-Authenticate"), tc.status, tc.www, body)
				}
				if strings.Contains(body, tc.bearer) && tc.bearer != "" {
					t.Errorf("%s: the answer repeats the token", tc.name)
				}
			}

			// olga sees the console as an admin, and alice's call as
			// hers: her subject, the issuer beside it, issuer#sub whole.
			// (The console reads the audit log every 250 ms.)
			var page string
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				var res *http.Response
				res, page = do(t, http.MethodGet, base+"/calls", olga, nil)
				if res.StatusCode != http.StatusOK {
					t.Fatalf("GET /calls as olga: %d", res.StatusCode)
				}
				if strings.Contains(page, "fs_read") {
					break
				}
			}
			issuer, _ := url.Parse(idp.Issuer)
			for _, want := range []string{
				`title="` + idp.Issuer + `#olga">olga@example.com</span> (admin)`,
				// By her name_claim (email), issuer#sub on hover.
				`<span class="principal" title="` + idp.Issuer + `#alice">alice@example.com</span> <small class="issuer">` + issuer.Host + `</small>`,
				`href="/console/upstreams"`,
			} {
				if !strings.Contains(page, want) {
					t.Errorf("calls page as olga has no %s:\n%s", want, page)
				}
			}
			if strings.Contains(page, `/console/logout`) {
				t.Error("an OAuth principal is offered a log-out (there is no login to end)")
			}
			seq := regexp.MustCompile(`href="/console/calls/(\d+)"`).FindStringSubmatch(page)
			if seq == nil {
				t.Fatalf("no call linked on the calls page:\n%s", page)
			}
			_, detail := do(t, http.MethodGet, base+"/calls/"+seq[1], olga, nil)
			for _, want := range []string{"<dt>Issuer</dt><dd>" + idp.Issuer + "</dd>", "<dt>Subject</dt><dd>alice</dd>", "<dt>Name</dt><dd>alice@example.com</dd>", "note.txt"} {
				if !strings.Contains(detail, want) {
					t.Errorf("call %s's page has no %s:\n%s", seq[1], want, detail)
				}
			}
			// Her forms carry her CSRF token, which another request of
			// hers takes; without it a POST is refused.
			csrf := regexp.MustCompile(`"X-CSRF-Token":"([^"]+)"`).FindStringSubmatch(page)
			if csrf == nil {
				t.Fatal("no CSRF token on the calls page")
			}
			id := strings.Repeat("a", 26)
			if res, _ := do(t, http.MethodPost, base+"/approvals/"+id, olga, url.Values{"decision": {"approve"}}); res.StatusCode != http.StatusForbidden {
				t.Errorf("POST as olga without the CSRF token: %d; want 403", res.StatusCode)
			}
			if res, _ := do(t, http.MethodPost, base+"/approvals/"+id, olga, url.Values{"decision": {"approve"}, "csrf": {csrf[1]}}); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/approvals?done=gone" {
				t.Errorf("POST as olga: %d → %q; want 303 → /console/approvals?done=gone", res.StatusCode, res.Header.Get("Location"))
			}
			if res, _ := do(t, http.MethodPost, base+"/approvals/"+id, alice, url.Values{"decision": {"approve"}, "csrf": {csrf[1]}}); res.StatusCode != http.StatusForbidden {
				t.Errorf("POST as alice with olga's CSRF token: %d; want 403", res.StatusCode)
			}
		})
	}
}
