package cli_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// startHTTP runs the binary with `serve --http 127.0.0.1:0` and returns the
// process and its MCP URL.
func startHTTP(t *testing.T, grace string) (*exec.Cmd, string, string) {
	t.Helper()
	ws := t.TempDir()
	src := fmt.Sprintf("[server]\nshutdown_grace = %q\n[profiles.default]\nworkspace = %q\n", grace, ws)
	cfg := writeConfig(t, src)
	cmd := exec.Command(binary(t), "serve", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg)
	return cmd, serveHTTP(t, cmd), ws
}

// serveHTTP starts cmd, a `serve --http` of the built binary, kills it when
// the test ends, and returns its MCP URL as the server logs it.
func serveHTTP(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	select {
	case url := <-urlc:
		return url
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not start", cmd)
	}
	return ""
}

func httpClient(t *testing.T, url string) *client.Client {
	return httpClientVersion(t, url, mcp.ProtocolVersion20251125)
}

func httpClientVersion(t *testing.T, url, version string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(version))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return c
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && strings.HasSuffix(string(b), "\n") {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never written", path)
	return ""
}

func TestGracefulShutdownLetsCallsFinish(t *testing.T) {
	cmd, url, ws := startHTTP(t, "10s")
	c := httpClient(t, url)
	marker := filepath.Join(ws, "started")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := callTool(context.Background(), c, "bash", map[string]any{"command": "echo x > " + marker + "; sleep 1; echo finished"}, nil)
		if err != nil {
			t.Logf("call error: %v", err)
		}
		done <- res
	}()
	waitFile(t, marker)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res == nil || resultText(res) != "finished" {
			t.Fatalf("in-flight call = %+v; want it to finish within the grace period", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("in-flight call never returned")
	}
	if err := waitExit(cmd, 15*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestGracefulShutdownCancelsAfterGrace checks, on both transports and
// both protocol eras, that a call still running when the grace ends is cut
// (its process dies) and answered "server shutting down" before the
// connection closes.
func TestGracefulShutdownCancelsAfterGrace(t *testing.T) {
	for _, mode := range []string{"http " + mcp.ProtocolVersion20251125, "http 2026-07-28", "stdio"} {
		t.Run(mode, func(t *testing.T) {
			var (
				cmd *exec.Cmd
				c   *client.Client
				ws  string
			)
			if mode == "stdio" {
				cmd, c, ws = startStdioClient(t, "500ms")
			} else {
				var url string
				cmd, url, ws = startHTTP(t, "500ms")
				c = httpClientVersion(t, url, strings.TrimPrefix(mode, "http "))
			}
			pidFile := filepath.Join(ws, "pid")
			answer := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := callTool(context.Background(), c, "bash", map[string]any{"command": "echo $$ > " + pidFile + "; sleep 300", "timeout_seconds": 600}, nil)
				if err != nil {
					t.Logf("call error: %v", err)
				}
				answer <- res
			}()
			pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, pidFile)))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case res := <-answer:
				if res == nil || !res.IsError || !strings.Contains(resultText(res), "server shutting down") {
					t.Errorf("cut call = %+v; want an error result saying the server is shutting down", res)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the cut call was never answered")
			}
			if err := waitExit(cmd, 15*time.Second); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took < 400*time.Millisecond {
				t.Errorf("server exited after %v, before the grace period", took)
			}
			waitGone(t, pid)
		})
	}
}

// startStdioClient runs `serve` on stdio with the given grace and returns
// the process and an initialized mcp-go client on its pipes.
func startStdioClient(t *testing.T, grace string) (*exec.Cmd, *client.Client, string) {
	t.Helper()
	ws := t.TempDir()
	src := fmt.Sprintf("[server]\nshutdown_grace = %q\n[profiles.default]\nworkspace = %q\n", grace, ws)
	cfg := writeConfig(t, src)
	cmd, c := stdioClient(t, append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg), mcp.ProtocolVersion20251125, "shutdown-test", "serve")
	return cmd, c, ws
}

func waitExit(cmd *exec.Cmd, d time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("server exit: %v", err)
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("server still running %v after SIGTERM", d)
	}
}

func TestNonLoopbackBindNeedsAuthOrInsecure(t *testing.T) {
	cmd := exec.Command(binary(t), "serve", "--http", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve on 0.0.0.0 without tokens: err = %v; want exit status 1", err)
	}
	if !strings.Contains(string(out), "refusing to serve 0.0.0.0:0 without auth") || !strings.Contains(string(out), "--insecure") {
		t.Errorf("message = %q; want it to name the fix", out)
	}
	// With --insecure it starts (and stops on SIGTERM).
	cmd = exec.Command(binary(t), "serve", "--http", "0.0.0.0:0", "--insecure")
	cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG=")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	started := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "mcp.http.start") {
			started = true
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if !started {
		t.Fatal("--insecure server did not start")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := waitExit(cmd, 15*time.Second); err != nil {
		t.Fatal(err)
	}
}
