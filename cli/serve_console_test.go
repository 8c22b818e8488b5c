package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/console"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
)

// TestServeMountsConsole: an HTTP serve with [console] enabled = true
// serves the console beside /mcp, under /console and nowhere else,
// behind the console's auth: without a token a page is not shown (the
// login is), an admin token sees it, a wrong one does not; its static
// files, login and redirects stay under /console; without enabled there
// is no console; and beyond loopback without tokens serve refuses to
// start it.
func TestServeMountsConsole(t *testing.T) {
	const token = "s3cret-admin"
	sum := sha256.Sum256([]byte(token))
	ws := t.TempDir()
	profile := "[profiles.default]\nworkspace = \"" + ws + "\"\n"
	tokens := "[[auth.tokens]]\nname = \"ops\"\nsha256 = \"" + hex.EncodeToString(sum[:]) + "\"\nprofile = \"default\"\nadmin = true\n"
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(t *testing.T, url, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode, res.Header.Get("Location")
	}
	start := func(t *testing.T, cfg string) string {
		cmd := exec.Command(binary(t), "serve", "--http", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg)
		return strings.TrimSuffix(serveHTTP(t, cmd), "/mcp")
	}

	t.Run("tokens", func(t *testing.T) {
		base := start(t, writeConfig(t, "[console]\nenabled = true\n"+tokens+profile))
		for _, path := range []string{"/console", "/console/"} {
			if code, loc := get(t, base+path, ""); code != http.StatusSeeOther || loc != "/console/calls" {
				t.Errorf("GET %s = %d → %q; want 303 → /console/calls", path, code, loc)
			}
		}
		// The console claims no path of the serve's root.
		for _, path := range []string{"/", "/calls", "/login", "/static/htmx.min.js", "/approvals/list"} {
			if code, _ := get(t, base+path, token); code != http.StatusNotFound {
				t.Errorf("GET %s with the console mounted = %d; want 404", path, code)
			}
		}
		if code, _ := get(t, base+"/console/static/htmx.min.js", ""); code != http.StatusOK {
			t.Errorf("GET /console/static/htmx.min.js = %d; want 200", code)
		}
		for _, tc := range []struct {
			bearer   string
			wantCode int
		}{
			{"", http.StatusSeeOther},          // to the login page
			{"wrong", http.StatusUnauthorized}, // or a refusal
			{token, http.StatusOK},
		} {
			code, loc := get(t, base+"/console/calls", tc.bearer)
			if code != tc.wantCode {
				t.Errorf("GET /console/calls with %q = %d (→ %q); want %d", tc.bearer, code, loc, tc.wantCode)
			}
			if code == http.StatusSeeOther && !strings.HasPrefix(loc, "/console/login?next=") {
				t.Errorf("GET /console/calls with %q → %q; want the login page", tc.bearer, loc)
			}
		}
		if code, _ := get(t, base+"/mcp", ""); code != http.StatusUnauthorized {
			t.Errorf("GET /mcp without a token = %d; want 401 (the console changes nothing there)", code)
		}
	})
	t.Run("not enabled", func(t *testing.T) {
		base := start(t, writeConfig(t, profile))
		if code, _ := get(t, base+"/console/calls", ""); code != http.StatusNotFound {
			t.Errorf("GET /console/calls without [console] enabled = %d; want 404", code)
		}
		if code, _ := get(t, base+"/console", ""); code != http.StatusNotFound {
			t.Errorf("GET /console without [console] enabled = %d; want 404", code)
		}
	})
	t.Run("beyond loopback without tokens", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary(t), "serve", "--http", "0.0.0.0:0", "--insecure")
		cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+writeConfig(t, "[console]\nenabled = true\n"+profile))
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("serve mounted a console on 0.0.0.0 without tokens:\n%s", out)
		}
		if !strings.Contains(string(out), "[console] enabled") || !strings.Contains(string(out), "without auth") {
			t.Errorf("output %q; want the refusal naming [console] enabled and the fix", out)
		}
	})
}

// serve mounts the console where its pages are.
func TestConsolePrefixAgrees(t *testing.T) {
	if console.Prefix != streamhttp.ConsolePrefix {
		t.Fatalf("console.Prefix %q, streamhttp.ConsolePrefix %q: serve would mount the console where it has no pages", console.Prefix, streamhttp.ConsolePrefix)
	}
}
