package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bubbuild/bub-mcp/internal/oidctest"
)

// TestServeOAuth runs `bub-mcp serve --http` as an OAuth resource server
// in front of a real OpenID provider (Ory Hydra, tokens from a real
// authorization-code flow with PKCE) and talks to it with mcp-go's client:
// RFC 9728 metadata, the 401 challenge clients start from, a token's
// principal in the audit log, refusals of other resources' and other
// issuers' tokens, static tokens beside OAuth, and the request limit.
func TestServeOAuth(t *testing.T) {
	idp := oidctest.Start(t)
	addr := freeAddr(t)
	public := "http://" + addr
	endpoint, tight := public+"/mcp", public+"/mcp/p/tight"
	const static = "static-s3cret"
	sum := sha256.Sum256([]byte(static))
	ws, home := noteWorkspace(t, "from the workspace\n"), t.TempDir()
	src := fmt.Sprintf(`[server]
public_url = %q

[profiles.default]
workspace = %q

[profiles.tight]
workspace = %q

[[auth.tokens]]
name = "ci"
sha256 = %q

[auth.oauth]
issuer = %q
required_scopes = ["mcp"]
name_claim = "email"

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "default"

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "tight"

[[limits]]
name = "tight-requests"
profile = "tight"
per_minute = 1
burst = 2
`, public, ws, ws, hex.EncodeToString(sum[:]), idp.Issuer)
	cfg := writeConfig(t, src)
	cmd := exec.Command(binary(t), "serve", "--http", addr)
	cmd.Env = append(os.Environ(), "BUB_HOME="+home, "BUB_CONFIG="+cfg)
	serveHTTP(t, cmd)

	oauthClient := idp.NewClient(t, oidctest.ClientOptions{Audience: []string{endpoint, tight, "https://other.example.com/mcp"}, Scopes: []string{"mcp"}})
	eng := map[string]any{"groups": []string{"eng"}, "email": "alice@example.com", "email_verified": true}
	token := func(aud string, scopes ...string) string {
		return idp.Token(t, oauthClient, oidctest.TokenRequest{Subject: "alice", Scopes: scopes, Audience: []string{aud}, Claims: eng}).AccessToken
	}

	t.Run("metadata", func(t *testing.T) {
		res, err := http.Get(public + "/.well-known/oauth-protected-resource/mcp")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var meta struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		if err := json.NewDecoder(res.Body).Decode(&meta); err != nil || res.StatusCode != 200 {
			t.Fatalf("metadata: %d %v", res.StatusCode, err)
		}
		if meta.Resource != endpoint || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != idp.Issuer {
			t.Errorf("metadata = %+v; want resource %s and the issuer", meta, endpoint)
		}
	})

	t.Run("install sees the sign-in", func(t *testing.T) {
		h := t.TempDir()
		code, _, stderr := runBinary(t, append(agentEnv(h, ""), "HOME="+h), "", "install", "--print", "--http", tight, "claude-code")
		want := tight + " asks for an OAuth sign-in (at " + idp.Issuer + "). In Claude Code, run /mcp"
		if code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("install --print --http: exit %d, stderr %q; want %q", code, stderr, want)
		}
	})

	post := func(t *testing.T, url, bearer string) (int, http.Header, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "server/discover")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}

	challenge := `Bearer resource_metadata="` + public + `/.well-known/oauth-protected-resource/mcp", scope="mcp"`
	for _, tc := range []struct {
		name, bearer string
		status       int
		www          string
	}{
		{"no token", "", 401, challenge},
		{"token for another resource", token("https://other.example.com/mcp", "mcp"), 401, challenge + `, error="invalid_token", error_description="token is for another resource"`},
		{"missing scope", token(endpoint), 403, challenge + `, error="insufficient_scope", error_description="the token lacks a required scope"`},
		{"not a token at all", "garbage", 401, challenge + `, error="invalid_token", error_description="unsupported token format"`},
		{"static token beside OAuth", static, 200, ""},
		{"OAuth token", token(endpoint, "mcp"), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := post(t, endpoint, tc.bearer)
			if status != tc.status || h.Get("WWW-Authenticate") != tc.www {
				t.Errorf("status %d, WWW-Authenticate %q; want %d, %q (body %.300s)", status, h.Get("WWW-Authenticate"), tc.status, tc.www, body)
			}
		})
	}

	t.Run("mcp-go client with an OAuth token", func(t *testing.T) {
		tr, err := transport.NewStreamableHTTP(endpoint, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token(endpoint, "mcp")}))
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
		res, err := c.CallTool(t.Context(), req)
		if err != nil || res.IsError {
			t.Fatalf("fs_read: %v %+v", err, res)
		}
		if got := res.Content[0].(mcp.TextContent).Text; !strings.Contains(got, "from the workspace") {
			t.Errorf("fs_read = %q", got)
		}
		// The audit log names the principal: issuer#sub.
		log := waitFile(t, filepath.Join(home, "audit", "audit.jsonl"))
		if want := `"principal":"` + idp.Issuer + `#alice","principal_name":"alice@example.com"`; !strings.Contains(log, want) {
			t.Errorf("audit log has no %s (name_claim = \"email\" names the principal):\n%s", want, log)
		}
	})

	t.Run("request limit", func(t *testing.T) {
		tok := token(tight, "mcp")
		var got []int
		for range 3 {
			status, h, _ := post(t, tight, tok)
			got = append(got, status)
			if status == 429 && h.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		}
		if fmt.Sprint(got) != "[200 200 429]" {
			t.Errorf("three requests at burst 2: %v; want [200 200 429]", got)
		}
	})
}
