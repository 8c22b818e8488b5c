package cli_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bubbuild/bub-mcp/internal/pgtest"
)

// startConsole runs `bub-mcp console --http 127.0.0.1:0` with env and
// returns the URL it prints.
func startConsole(t *testing.T, env []string) string {
	t.Helper()
	cmd := exec.Command(binary(t), "console", "--http", "127.0.0.1:0")
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
		io.Copy(io.Discard, out)
	}()
	select {
	case u := <-line:
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Fatalf("console printed %q; stderr:\n%s", u, stderr.String())
		}
		return strings.TrimSuffix(u, "/")
	case <-time.After(30 * time.Second):
		t.Fatalf("console printed no URL; stderr:\n%s", stderr.String())
	}
	return ""
}

var (
	pendingRE = regexp.MustCompile(`id="appr-([a-z0-9]+)"`)
	csrfRE    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// waitPending polls the console's approvals page until a call waits and
// returns its id and the page's CSRF token.
func waitPending(t *testing.T, base string) (id, csrf string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(base + "/approvals")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if m := pendingRE.FindSubmatch(b); m != nil {
			c := csrfRE.FindSubmatch(b)
			if c == nil {
				t.Fatalf("approvals page has no CSRF token:\n%s", b)
			}
			return string(m[1]), string(c[1])
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no call appeared in the console's approvals queue")
	return "", ""
}

// TestConsoleApprovalHandOff: a serve process holds a confirmed call
// from a client without elicitation; a separate console process decides
// it through its HTTP form; the call goes on (or fails with the reason).
// With the file store both share $BUB_HOME/approvals; with [store] kind =
// "postgres" each has a $BUB_HOME of its own, so the call and the
// decision travel through the database (bub_approvals) alone.
func TestConsoleApprovalHandOff(t *testing.T) {
	for _, store := range []string{"file", "postgres"} {
		for _, tc := range []struct {
			decision, reason string
			wantErr          bool
			want             string
		}{
			{"approve", "", false, "handed-off"},
			{"deny", "not on a Friday", true, "not on a Friday"},
		} {
			t.Run(store+"/"+tc.decision, func(t *testing.T) {
				testApprovalHandOff(t, store, tc.decision, tc.reason, tc.wantErr, tc.want)
			})
		}
	}
}

func testApprovalHandOff(t *testing.T, store, decision, reason string, wantErr bool, want string) {
	serveHome, consoleHome, ws := t.TempDir(), t.TempDir(), t.TempDir()
	src := fmt.Sprintf("[profiles.default]\nworkspace = %q\nconfirm = [\"bash\"]\nconfirm_via = [\"elicitation\", \"console\"]\nconfirm_timeout = \"60s\"\n", ws)
	dsn := ""
	if store == "postgres" {
		dsn = pgtest.DSN(t)
		src = "[store]\nkind = \"postgres\"\ndsn_env = \"BUB_TEST_DSN\"\n" + src
	} else {
		consoleHome = serveHome
	}
	cfg := writeConfig(t, src)
	env := func(home string) []string {
		return append(os.Environ(), "BUB_HOME="+home, "BUB_CONFIG="+cfg, "BUB_TEST_DSN="+dsn)
	}
	base := startConsole(t, env(consoleHome))
	_, c := stdioClient(t, env(serveHome), mcp.LATEST_PROTOCOL_VERSION, "Claude Desktop", "serve")
	type result struct {
		res *mcp.CallToolResult
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		res, err := callTool(t.Context(), c, "bash", map[string]any{"command": "echo handed-off"}, nil)
		done <- result{res, err, time.Now()}
	}()
	id, csrf := waitPending(t, base)
	select {
	case r := <-done:
		t.Fatalf("the call finished before a decision: %v %v", r.err, r.res)
	default:
	}
	// Without the CSRF token the decision is refused.
	res, err := http.PostForm(base+"/approvals/"+id, url.Values{"decision": {decision}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("POST without CSRF token: status %d; want 403", res.StatusCode)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	decided := time.Now()
	res, err = noRedirect.PostForm(base+"/approvals/"+id, url.Values{"decision": {decision}, "reason": {reason}, "csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/approvals?done="+map[string]string{"approve": "approved", "deny": "denied"}[decision] {
		t.Fatalf("POST decision: status %d → %q; want 303 to the approvals page", res.StatusCode, res.Header.Get("Location"))
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not go on after the decision")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	// Reported, not asserted (no timed assertions): the waiting server
	// polls the queue every confirm.PollInterval.
	t.Logf("%s: the call went on %v after the decision", store, r.at.Sub(decided))
	if r.res.IsError != wantErr || !strings.Contains(resultText(r.res), want) {
		t.Errorf("result isError=%v %q; want isError=%v containing %q", r.res.IsError, resultText(r.res), wantErr, want)
	}
	// The queue is empty again; with PostgreSQL nothing went through
	// the files.
	for _, home := range []string{serveHome, consoleHome} {
		ents, _ := os.ReadDir(filepath.Join(home, "approvals"))
		for _, e := range ents {
			t.Errorf("left in %s/approvals: %s", home, e.Name())
		}
	}
	if store == "postgres" {
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM bub_approvals").Scan(&n); err != nil || n != 0 {
			t.Errorf("bub_approvals holds %d rows (%v); want 0", n, err)
		}
	}
}

// TestConsoleRefusesNonLoopbackWithoutAuth: the console does not listen
// beyond loopback unless a token can log in.
func TestConsoleRefusesNonLoopbackWithoutAuth(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(binary(t), "console", "--http", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), "BUB_HOME="+home, "BUB_CONFIG=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("console on 0.0.0.0 without tokens started:\n%s", out)
	}
	if !strings.Contains(string(out), "refusing to serve beyond loopback without auth") {
		t.Errorf("output %q; want the refusal naming the fix", out)
	}
}
