package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/internal/testbin"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// nodeModules is where e2e/setup.sh installs the pinned npm servers.
var nodeModules = filepath.Join("..", "e2e", "node_modules")

// needCmd fails (CI=true) or skips the test when a command it needs is
// not on PATH.
func needCmd(t testing.TB, name string) {
	t.Helper()
	testenv.MustHaveExec(t, name, "install it (make test's setup does)")
}

// npmServer returns the command line of a pinned npm MCP server run by
// the pinned Node.
func npmServer(t testing.TB, pkg string, args ...string) (string, []string) {
	t.Helper()
	return testenv.NPMServer(t, pkg, args...)
}

// stdioTable is an [upstreams.<name>] table for a stdio server.
func stdioTable(name, command string, args []string, extra string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return fmt.Sprintf("[upstreams.%s]\ncommand = %q\nargs = [%s]\n%s\n", name, command, strings.Join(q, ", "), extra)
}

// everything is server-everything over stdio.
func everything(t testing.TB, extra string) string {
	cmd, args := npmServer(t, "server-everything", "stdio")
	return stdioTable("everything", cmd, args, extra)
}

// bubBinary is the built bub-mcp, to mount it as an upstream.
func bubBinary(t testing.TB) string {
	return testbin.Build(t, "github.com/bubbuild/bub-mcp/cmd/bub-mcp")
}

// plainBinary is the built internal/bench/plainmcp, the benchmark's plain
// mcp-go proxy.
func plainBinary(t testing.TB) string {
	return testbin.Build(t, "github.com/bubbuild/bub-mcp/internal/bench/plainmcp")
}

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	testbin.Cleanup()
	os.Exit(code)
}

// host is an App with the upstream module (and modules) over the bub.toml
// src, in a fresh $BUB_HOME unless home is given.
type host struct {
	*app.App
	home string
	conn *providers.Connection
}

func newHost(t testing.TB, src, home string, modules ...string) *host {
	t.Helper()
	if home == "" {
		home = t.TempDir()
	}
	a, err := tryHost(t, src, home, modules...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func tryHost(t testing.TB, src, home string, modules ...string) (*host, error) {
	t.Helper()
	cfg, err := config.Parse(filepath.Join(home, "bub.toml"), src, func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	ws := filepath.Join(home, "workspace") // one per home: a restarted host finds its sessions
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return nil, err
	}
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: registry.New(), Modules: append([]string{"upstream"}, modules...),
		Home: home, Workspace: ws, Getenv: os.Getenv, OnDemand: onDemand, Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { a.Close() })
	h := &host{App: a, home: home, conn: &providers.Connection{Transport: "test", Profile: config.DefaultProfile}}
	if err := a.Resolve(context.Background(), h.conn); err != nil {
		t.Fatal(err)
	}
	// Start-up does not wait for upstreams; most tests want them up.
	if m, ok := upstream.FromApp(a); ok && !noWait && !onDemand {
		if err := m.Wait(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	return h, nil
}

// noWait is set by tests of start-up itself, which must see the upstreams
// still starting (they do not run in parallel).
var noWait bool

// onDemand builds the host as a one-shot command does
// (app.Options.OnDemand); set by the tests of that mode only.
var onDemand bool

// testWriter sends logs to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// call runs a direct call through the App's one call path.
func (h *host) call(ctx context.Context, tool string, args any) registry.Result {
	b, _ := json.Marshal(args)
	return h.Call(ctx, h.conn, app.Request{Tool: tool, Args: b})
}

// status returns one upstream's status.
func (h *host) status(t testing.TB, name string) upstream.Status {
	t.Helper()
	m, ok := upstream.FromApp(h.App)
	if !ok {
		t.Fatal("no upstream module")
	}
	for _, s := range m.Status() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no upstream %q", name)
	return upstream.Status{}
}

// waitState polls until an upstream reaches state (the lifecycle runs in
// the background), failing after a generous bound.
func (h *host) waitState(t testing.TB, name string, want upstream.State, pred func(upstream.Status) bool) upstream.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := h.status(t, name)
		if s.State == want && (pred == nil || pred(s)) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream %s: state %s (last error %q); want %s", name, s.State, s.LastError, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serve serves h over streamable HTTP on 127.0.0.1:0 and returns an
// initialized mcp-go client with the given options.
func (h *host) serve(t testing.TB, opts ...client.ClientOption) (*client.Client, string) {
	t.Helper()
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h.App, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := upstream.FromApp(h.App)
	handler := streamhttp.New(srv, streamhttp.Options{Profiles: h.Config().ProfileNames(), Loopback: true,
		Health: func() streamhttp.Health { return streamhttp.Health{Details: m.Healthz()} }})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { handler.CloseSessions(context.Background()); ts.Close() })
	c := mcpClient(t, ts.URL+"/mcp", opts...)
	return c, ts.URL
}

// mcpClient connects an mcp-go client on the 2025 session protocol (the
// one with server-to-client requests on the wire).
func mcpClient(t testing.TB, url string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	//lint:ignore SA1019 the 2025 session protocol on purpose: its GET stream carries our list_changed
	tr, err := transport.NewStreamableHTTP(url, transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, append([]client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20251125)}, opts...)...)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// freePort returns a loopback port nobody listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// callWith is call with a Peer listening.
func (h *host) callWith(ctx context.Context, tool string, args any, peer registry.Peer) registry.Result {
	b, _ := json.Marshal(args)
	return h.Call(ctx, h.conn, app.Request{Tool: tool, Args: b, Peer: peer})
}

// waitTool waits for a tool an upstream registers after it initialized
// (server-everything's capability-dependent tools come with a
// list_changed).
func (h *host) waitTool(t testing.TB, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := h.Registry().Lookup(name); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tool %s never registered", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// execServer runs a server process for the test, in its own process
// group, killed with it.
func execServer(t testing.TB, command string, args []string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(command, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd
}

func itoa(n int) string { return strconv.Itoa(n) }

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(strings.TrimSpace(s), v) }
