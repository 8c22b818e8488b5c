package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// install --http tells the user when the server asks for an OAuth sign-in
// (its RFC 9728 metadata names an authorization server) and how the
// client signs in; not for a server without OAuth, nor for an entry that
// carries its own Authorization header.
func TestInstallHTTPSignInHint(t *testing.T) {
	var probes atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-protected-resource/oauth/mcp", func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"resource":"http://%s/oauth/mcp","authorization_servers":["https://idp.example"]}`, r.Host)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		http.NotFound(w, r)
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	for _, tc := range []struct {
		name    string
		args    []string
		want    string // in stdout; "" for no hint
		probes  int64
		noProbe bool
	}{
		{"oauth, claude-code", []string{"--http", ts.URL + "/oauth/mcp", "claude-code"}, "asks for an OAuth sign-in (at https://idp.example). In Claude Code, run /mcp, pick bub and choose Authenticate.", 1, false},
		{"oauth, gemini", []string{"--http", ts.URL + "/oauth/mcp", "--name", "team", "gemini-cli"}, "In Gemini CLI, run /mcp auth team.", 1, false},
		{"oauth, codex", []string{"--http", ts.URL + "/oauth/mcp", "codex"}, "Run: codex mcp login bub", 1, false},
		{"no oauth", []string{"--http", ts.URL + "/plain/mcp", "cursor"}, "", 2, false},
		{"own token", []string{"--http", ts.URL + "/oauth/mcp", "--header", "Authorization:Bearer x", "vscode"}, "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			before := probes.Load()
			code, out, errOut := runCLIEnv(t, map[string]string{"HOME": home, "BUB_HOME": home}, append([]string{"install", "--workspace", home}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := probes.Load() - before; got != tc.probes {
				t.Errorf("%d metadata requests; want %d", got, tc.probes)
			}
			if tc.want == "" {
				if strings.Contains(out, "sign-in") {
					t.Errorf("a hint where none is due:\n%s", out)
				}
				return
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
	// A server that is not running: said, and the entry is still written.
	home := t.TempDir()
	ts2 := httptest.NewServer(http.NotFoundHandler())
	gone := ts2.URL
	ts2.Close()
	code, out, errOut := runCLIEnv(t, map[string]string{"HOME": home, "BUB_HOME": home}, "install", "--workspace", home, "--http", gone+"/mcp", "cursor")
	if code != 0 || !strings.Contains(out, "Could not check whether "+gone+"/mcp asks for a sign-in") || !strings.Contains(out, "Added \"bub\"") {
		t.Errorf("server down: exit %d, %q (%s)", code, out, errOut)
	}
}
