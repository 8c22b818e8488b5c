package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The two servers under test, by the names the benchmarks use.
const (
	bub   = "bub"
	plain = "plain"
)

var kinds = []string{bub, plain}

const (
	bubPkg   = "github.com/bubbuild/bub-mcp/internal/conformance/cmd/bub-mcp-conformance"
	plainPkg = "github.com/bubbuild/bub-mcp/internal/bench/plainmcp"
	// servePkg is the binary users run, for BenchmarkColdStart: bubPkg
	// adds the fixtures the call benchmarks need (the echo tool) and does
	// not carry the builtin tools' schema seeds (internal/schemaseed).
	servePkg = "github.com/bubbuild/bub-mcp/cmd/bub-mcp"
)

// clkTck is sysconf(_SC_CLK_TCK), the unit of utime and stime in
// /proc/<pid>/stat. It is 100 on every Linux ABI Go supports (USER_HZ), and
// reading it needs cgo, so it is a constant.
const clkTck = 100

// binEnv name environment variables that replace a built binary with a
// given one, to compare a candidate build (say, with a fix) against the
// baseline: BENCH_BUB_BIN=/tmp/candidate go test -bench ....
var binEnv = map[string]string{bub: "BENCH_BUB_BIN", plain: "BENCH_PLAIN_BIN"}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binary returns the path of kind's server binary. Both are built together,
// once per test binary, without the race detector or coverage whatever the
// test itself runs with, so they are what a user runs.
func binary(tb testing.TB, kind string) string {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skip("bench: needs Linux /proc")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "bub-mcp-bench-")
		if buildErr != nil {
			return
		}
		start := time.Now()
		// go test puts its own GOROOT/bin first in PATH.
		cmd := exec.Command("go", "build", "-o", buildDir+string(filepath.Separator), bubPkg, plainPkg, servePkg)
		cmd.Env = os.Environ()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		tb.Logf("built %s, %s and %s in %v", filepath.Base(bubPkg), filepath.Base(plainPkg), filepath.Base(servePkg), time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	if p := os.Getenv(binEnv[kind]); p != "" {
		return p
	}
	name := map[string]string{bub: filepath.Base(bubPkg), plain: filepath.Base(plainPkg)}[kind]
	return filepath.Join(buildDir, name)
}

// serveBinary is the built cmd/bub-mcp, or BENCH_SERVE_BIN.
func serveBinary(tb testing.TB) string {
	tb.Helper()
	binary(tb, bub) // builds them all
	if p := os.Getenv("BENCH_SERVE_BIN"); p != "" {
		return p
	}
	return filepath.Join(buildDir, filepath.Base(servePkg))
}

// server is one running server process with a connected, initialized
// client.
type server struct {
	kind, transport string
	protocol        string // negotiated
	pin             string // the version clients ask for; "" is the newest
	pid             int
	client          *client.Client
	stderr          *tail
	stop            func()    // ends the clients and the process
	initialized     time.Time // when Initialize returned: the answer read, notifications/initialized sent

	url   string           // HTTP: the MCP endpoint
	ht    *http.Transport  // HTTP: shared by every client
	extra []*client.Client // connect's, closed by stop
}

// serverEnv is the environment a server runs with: the test's, minus any
// BUB_* setting of the developer's (BUB_CPUPROFILE and BUB_MEMPROFILE,
// diagnostics, are kept),
// plus a fresh $BUB_HOME. bub-mcp thus runs its zero configuration (default
// profile, audit log on, info logs).
func serverEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BUB_") || strings.HasPrefix(kv, "BUB_CPUPROFILE=") || strings.HasPrefix(kv, "BUB_MEMPROFILE=") {
			env = append(env, kv)
		}
	}
	return append(env, "BUB_HOME="+home)
}

func serverArgs(kind, tr string) []string {
	switch {
	case kind == bub && tr == "stdio":
		return []string{"serve"}
	case kind == bub:
		return []string{"serve", "--http", "127.0.0.1:0"}
	case tr == "stdio":
		return nil
	default:
		return []string{"-http", "127.0.0.1:0"}
	}
}

// clientOptions pins the protocol version the client negotiates; with
// none, the mcp-go client probes server/discover and speaks 2026-07-28.
func clientOptions(protocol string) []client.ClientOption {
	if protocol != "" {
		return []client.ClientOption{client.WithProtocolVersion(protocol)}
	}
	return nil
}

// startServer starts kind on transport tr ("stdio" or "http") in a fresh
// $BUB_HOME and workspace under dir, and initializes a client that speaks
// the protocol BENCH_PROTOCOL names (by default the newest). The caller
// must call stop.
func startServer(ctx context.Context, bin, kind, tr, dir string) (*server, error) {
	return startServerProtocol(ctx, bin, kind, tr, dir, os.Getenv("BENCH_PROTOCOL"))
}

// startServerProtocol is startServer with the protocol version given.
func startServerProtocol(ctx context.Context, bin, kind, tr, dir, protocol string) (*server, error) {
	home, ws := filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	s := &server{kind: kind, transport: tr, pin: protocol, stderr: &tail{}}
	var err error
	if tr == "stdio" {
		err = s.startStdio(ctx, bin, home, ws, protocol)
	} else {
		err = s.startHTTP(ctx, bin, home, ws, protocol)
	}
	if err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "bub-mcp-bench", Version: "dev"}
	res, err := s.client.Initialize(ctx, init)
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("%s %s: initialize: %w\nstderr: %s", kind, tr, err, s.stderr)
	}
	s.protocol, s.initialized = res.ProtocolVersion, time.Now()
	return s, nil
}

func (s *server) startStdio(ctx context.Context, bin, home, ws, protocol string) error {
	var cmd *exec.Cmd
	tr := transport.NewStdioWithOptions(bin, nil, serverArgs(s.kind, "stdio"),
		transport.WithCommandStderrWriter(s.stderr),
		transport.WithCommandFunc(func(_ context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			// Not CommandContext: the process lives until Close, not until
			// the ctx that started it ends.
			cmd = exec.Command(command, args...)
			cmd.Env = serverEnv(home)
			cmd.Dir = ws
			return cmd, nil
		}))
	// Start spawns the process; the ctx is kept for the transport's life.
	if err := tr.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("%s stdio: %w", s.kind, err)
	}
	s.pid = cmd.Process.Pid
	s.client = client.NewClient(tr, clientOptions(protocol)...)
	if err := s.client.Start(ctx); err != nil {
		tr.Close()
		return err
	}
	// Closing stdin ends both servers; the transport waits for the exit
	// (then SIGTERM, then SIGKILL).
	s.stop = func() { _ = s.client.Close() }
	return nil
}

var urlRE = regexp.MustCompile(`url=(http://\S+)`)

func (s *server) startHTTP(ctx context.Context, bin, home, ws, protocol string) error {
	cmd := exec.Command(bin, serverArgs(s.kind, "http")...)
	cmd.Env = serverEnv(home)
	cmd.Dir = ws
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s http: %w", s.kind, err)
	}
	s.pid = cmd.Process.Pid
	waited := make(chan struct{})
	kill := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	}
	urls := make(chan string, 1)
	go func() {
		// Read stderr to its end (the server must never block on it),
		// keeping a tail for error messages and reporting the URL.
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			line := sc.Bytes()
			s.stderr.Write(line)
			s.stderr.Write([]byte{'\n'})
			if m := urlRE.FindSubmatch(line); m != nil && !found {
				found = true
				urls <- string(m[1])
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		close(urls)
		_ = cmd.Wait()
		close(waited)
	}()
	var url string
	select {
	case u, ok := <-urls:
		if !ok {
			kill()
			return fmt.Errorf("%s http: exited before listening\nstderr: %s", s.kind, s.stderr)
		}
		url = u
	case <-time.After(30 * time.Second):
		kill()
		return fmt.Errorf("%s http: no url= line on stderr after 30s\nstderr: %s", s.kind, s.stderr)
	}
	// One client, many concurrent POSTs: keep enough idle connections that
	// c=32 does not reconnect for every call (net/http keeps 2 per host by
	// default), which would measure TCP setup instead of the server.
	ht := http.DefaultTransport.(*http.Transport).Clone()
	ht.MaxIdleConns, ht.MaxIdleConnsPerHost = 256, 256
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(&http.Client{Transport: ht}))
	if err != nil {
		kill()
		return err
	}
	s.client = client.NewClient(tr, clientOptions(protocol)...)
	if err := s.client.Start(ctx); err != nil {
		kill()
		return err
	}
	s.url, s.ht = url, ht
	s.stop = func() {
		for _, c := range s.extra {
			_ = c.Close()
		}
		_ = s.client.Close()
		ht.CloseIdleConnections()
		kill()
	}
	return nil
}

// connect opens another initialized client of an HTTP server, named name
// (on the 2025 protocol, a session of its own); stop closes it.
func (s *server) connect(ctx context.Context, name string) (*client.Client, error) {
	if s.url == "" {
		return nil, fmt.Errorf("%s %s: only an HTTP server takes more clients", s.kind, s.transport)
	}
	tr, err := transport.NewStreamableHTTP(s.url, transport.WithHTTPBasicClient(&http.Client{Transport: s.ht}))
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, clientOptions(s.pin)...)
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	s.extra = append(s.extra, c)
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "dev"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("%s %s: initialize %s: %w", s.kind, s.transport, name, err)
	}
	return c, nil
}

// start is startServer for a test or benchmark: it fails tb on error and
// stops the server in Cleanup.
func start(tb testing.TB, kind, tr string) *server {
	tb.Helper()
	bin := binary(tb, kind)
	s, err := startServer(context.Background(), bin, kind, tr, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.stop)
	return s
}

func echoRequest(msg string) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": msg}
	return req
}

// echo calls the echo tool and checks its answer.
func (s *server) echo(ctx context.Context, req mcp.CallToolRequest) error {
	return s.echoOn(ctx, s.client, req)
}

// echoOn is echo through client c of s.
func (s *server) echoOn(ctx context.Context, c *client.Client, req mcp.CallToolRequest) error {
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("%s %s: tools/call echo: %w", s.kind, s.transport, err)
	}
	want := "Echo: " + req.Params.Arguments.(map[string]any)["message"].(string)
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("%s %s: echo = %+v; want one text %q", s.kind, s.transport, res, want)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != want {
		return fmt.Errorf("%s %s: echo content = %#v; want text %q", s.kind, s.transport, res.Content[0], want)
	}
	return nil
}

// cpu is the server's CPU time so far from /proc/<pid>/stat: utime+stime,
// all threads, in clock ticks.
func (s *server) cpu() (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Field 2, comm, is parenthesised and may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: malformed /proc/%d/stat", s.pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: short /proc/%d/stat", s.pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("bench: /proc/%d/stat: %w", s.pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clkTck, nil
}

// schedCPU is the server's CPU time from the scheduler's per-thread run
// time (/proc/<pid>/task/*/schedstat, nanoseconds). It misses threads that
// have exited, which a Go server rarely has; it serves as a fine-grained
// cross-check of cpu.
func (s *server) schedCPU() (time.Duration, error) {
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(s.pid) + "/task/*/schedstat")
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("bench: no schedstat for %d", s.pid)
	}
	var total time.Duration
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // thread exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: %s: %w", p, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// mem is a server's memory from /proc/<pid>/status, in bytes.
type mem struct {
	rss  int64 // VmRSS: resident now
	hwm  int64 // VmHWM: peak resident
	anon int64 // RssAnon: heap, stacks, written data
	file int64 // RssFile: mapped pages of the binary and libraries
}

func (s *server) memory() (mem, error) {
	var m mem
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/status")
	if err != nil {
		return m, err
	}
	fields := map[string]*int64{"VmRSS": &m.rss, "VmHWM": &m.hwm, "RssAnon": &m.anon, "RssFile": &m.file}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		dst := fields[k]
		if !ok || dst == nil {
			continue
		}
		f := strings.Fields(v) // "1234 kB"
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("bench: /proc/%d/status: %s", s.pid, strings.TrimSpace(line))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("bench: /proc/%d/status: %w", s.pid, err)
		}
		*dst = n << 10
	}
	if m.rss == 0 {
		return m, fmt.Errorf("bench: no VmRSS for %d", s.pid)
	}
	return m, nil
}

// selfCPU is this process's CPU time (user+system, all threads).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tail keeps the last 16 KiB written to it, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 16<<10; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
