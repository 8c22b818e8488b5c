package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// revokingUpstream is an MCP server that takes one bearer token and its
// authorization server, whose metadata names a revocation endpoint when
// revocation is set; that endpoint answers with status and body and
// records the tokens sent to it.
type revokingUpstream struct {
	url string

	mu      sync.Mutex
	revoked []string
}

func startRevokingUpstream(t *testing.T, revocation bool, status int, body string) *revokingUpstream {
	t.Helper()
	const access = "at-local-0123456789"
	up := &revokingUpstream{}
	s := server.NewMCPServer("revoking-upstream", "1")
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo: " + req.GetString("text", "")), nil
	})
	mcpHandler := server.NewStreamableHTTPServer(s, server.WithStateful(true))
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/.well-known/oauth-authorization-server") {
			http.NotFound(w, r)
			return
		}
		rev := ""
		if revocation {
			rev = fmt.Sprintf(`,"revocation_endpoint":%q`, up.url+"/revoke")
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"response_types_supported":["code"],"code_challenge_methods_supported":["S256"]%s}`,
			up.url, up.url+"/authorize", up.url+"/token", rev)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("grant_type") != "authorization_code" || r.Form.Get("code") != "the-code" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"refresh_token":"rt-local-0123456789","token_type":"Bearer","expires_in":3600}`, access)
	})
	mux.HandleFunc("POST /revoke", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		up.mu.Lock()
		up.revoked = append(up.revoked, r.Form.Get("token"))
		up.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+access {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	up.url = ts.URL
	return up
}

func (up *revokingUpstream) revocations() []string {
	up.mu.Lock()
	defer up.mu.Unlock()
	return append([]string(nil), up.revoked...)
}

// loginLocal runs `bub-mcp login up` with env and is its browser: it
// takes the authorization URL it prints and comes back to its loopback
// redirect with a code, as the authorization server would.
func loginLocal(t *testing.T, env []string, asURL string) {
	t.Helper()
	authURL, done := startLogin(t, env, asURL)
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	back := q.Get("redirect_uri") + "?" + url.Values{"code": {"the-code"}, "state": {q.Get("state")}}.Encode()
	if !strings.HasPrefix(back, "http://127.0.0.1:") {
		t.Fatalf("redirect to %s; want the loopback", back)
	}
	res, err := http.Get(back)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "Signed in") {
		t.Fatalf("loopback redirect: %d %s", res.StatusCode, page)
	}
	done()
}

// startLogin starts `bub-mcp login up` with env and returns the
// authorization URL it prints (at the authorization server asURL), and
// done, which waits for the command once the browser came back and checks
// that it signed the local principal in.
func startLogin(t *testing.T, env []string, asURL string) (authURL string, done func()) {
	t.Helper()
	login := exec.Command(binary(t), "login", "up")
	login.Env = env
	var out bytes.Buffer
	login.Stdout = &out
	stderr, err := login.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, asURL+"/authorize?") {
			authURL = line
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	if authURL == "" {
		login.Wait()
		t.Fatal("bub-mcp login printed no authorization URL")
	}
	return authURL, func() {
		t.Helper()
		if err := login.Wait(); err != nil || !strings.Contains(out.String(), `signed in to up as principal "local"`) {
			t.Fatalf("bub-mcp login: %v %s", err, out.String())
		}
	}
}

// `bub-mcp upstreams logout` says for whom the upstream's authorization
// server revoked the grant and for whom the token set was deleted only
// here, and why: the authorization server names no revocation endpoint,
// or refuses the revocation (whose error_description, which may echo
// what it was sent, is not shown). The set is deleted either way, and
// the output holds no token.
func TestUpstreamsLogoutDeletedOnlyHere(t *testing.T) {
	const head = "upstream up: deleted the tokens of \"local\"\n"
	for _, tc := range []struct {
		name       string
		revocation bool
		status     int
		body       string
		want       string
		requests   int
	}{
		{"no revocation endpoint", false, 0, "", head +
			"  deleted only here, not revoked: \"local\": the authorization server offers no revocation endpoint\n", 0},
		{"revocation refused", true, http.StatusBadRequest, `{"error":"invalid_client","error_description":"rt-local-0123456789 is not welcome"}`, head +
			"  deleted only here, not revoked: \"local\": revoking the refresh token: the authorization server answered 400 Bad Request (invalid_client)\n", 1},
		{"revoked", true, http.StatusOK, "", head +
			"  revoked at the authorization server: \"local\"\n", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startRevokingUpstream(t, tc.revocation, tc.status, tc.body)
			cfg := writeConfig(t, fmt.Sprintf("[upstreams.up]\nurl = %q\nauth = \"oauth\"\nclient_id = \"bub\"\n", up.url+"/mcp"))
			env := append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg)
			loginLocal(t, env, up.url)

			logout := exec.Command(binary(t), "upstreams", "logout", "up")
			logout.Env = env
			var stderr bytes.Buffer
			logout.Stderr = &stderr
			out, err := logout.Output()
			if err != nil {
				t.Fatalf("upstreams logout: %v\n%s%s", err, out, stderr.Bytes())
			}
			if diff := cmp.Diff(tc.want, string(out)); diff != "" {
				t.Errorf("upstreams logout output (-want +got):\n%s", diff)
			}
			for _, tok := range []string{"at-local-0123456789", "rt-local-0123456789"} {
				if bytes.Contains(out, []byte(tok)) || bytes.Contains(stderr.Bytes(), []byte(tok)) {
					t.Errorf("the logout's output shows a token (%s)", tok)
				}
			}
			if n := len(up.revocations()); n != tc.requests {
				t.Errorf("%d revocation requests; want %d", n, tc.requests)
			}

			again := exec.Command(binary(t), "upstreams", "logout", "up")
			again.Env = env
			out, err = again.Output()
			if err != nil || string(out) != "upstream up: no stored token for principal \"local\"\n" {
				t.Errorf("a second logout: %v %q; want no stored token", err, out)
			}
		})
	}
}
