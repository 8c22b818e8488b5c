package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// stdioProcess is a stdio MCP server started by an mcp-go client, with
// its pid for CPU accounting.
type stdioProcess struct {
	c   *client.Client
	pid int
}

func startStdio(tb testing.TB, command string, args, env []string) *stdioProcess {
	tb.Helper()
	var cmd *exec.Cmd
	tr := transport.NewStdioWithOptions(command, nil, args,
		transport.WithCommandFunc(func(_ context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd = exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			return cmd, nil
		}))
	if err := tr.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(context.Background(), req); err != nil {
		tb.Fatal(err)
	}
	return &stdioProcess{c: c, pid: cmd.Process.Pid}
}

// cpuTime is a process's user+system CPU so far, from /proc/<pid>/stat.
func cpuTime(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}

// BenchmarkUpstreamCall compares, in one run and with the same client, a
// tools/call of server-everything's echo made directly with the same call
// made through bub-mcp (stdio, default setup: views, validation, audit
// tape) mounting server-everything as an upstream, and through plainmcp
// -proxy, a proxy of nothing but mcp-go's server and client as shipped:
// the floor under bub-mcp's figure. Each round calls every path once, so
// all see the same machine. Reported per path: latency, ratio to direct,
// and the proxy process's own CPU per call (bub-cpu-µs/call for bub-mcp).
//
// BENCH_CPUPROFILE=<file> writes the bub-mcp process's CPU profile there
// (when the benchmark ends). BENCH_BUB_BIN=<binary> measures that bub-mcp
// instead of this tree's; BENCH_BASE_BIN=<binary> adds it as a "base"
// path, so a candidate and its baseline are compared in the same rounds.
func BenchmarkUpstreamCall(b *testing.B) { benchUpstreamCall(b, "hi") }

// BenchmarkUpstreamCallLarge is BenchmarkUpstreamCall with a 64 KiB
// message, so a 64 KiB result: the per-byte costs (decoding, validation,
// rendering, encoding) instead of the per-call ones. bub-mcp, in its
// default setup, spills the result to the session and answers with the
// spill's head and reference.
func BenchmarkUpstreamCallLarge(b *testing.B) {
	benchUpstreamCall(b, strings.Repeat("0123456789abcdef", 4096))
}

func benchUpstreamCall(b *testing.B, message string) {
	cmd, args := npmServer(b, "server-everything", "stdio")
	home := b.TempDir()
	if err := os.WriteFile(filepath.Join(home, "bub.toml"), []byte(stdioTable("everything", cmd, args, "")), 0o600); err != nil {
		b.Fatal(err)
	}
	type path struct {
		name, tool string // name "" is the direct path
		p          *stdioProcess
		t          time.Duration
		cpu0       time.Duration
	}
	bub := func(bin, profile string) *stdioProcess {
		env := []string{"BUB_HOME=" + home, "BUB_LOG_LEVEL=warn"}
		if profile != "" {
			env = append(env, "BUB_CPUPROFILE="+profile)
		}
		return startStdio(b, bin, []string{"serve", "--workspace", home}, env)
	}
	bin := os.Getenv("BENCH_BUB_BIN")
	if bin == "" {
		bin = bubBinary(b)
	}
	paths := []*path{
		{tool: "echo", p: startStdio(b, cmd, args, nil)},
		{name: "via", tool: "everything_echo", p: bub(bin, os.Getenv("BENCH_CPUPROFILE"))},
	}
	if base := os.Getenv("BENCH_BASE_BIN"); base != "" {
		paths = append(paths, &path{name: "base", tool: "everything_echo", p: bub(base, "")})
	}
	paths = append(paths, &path{name: "plain", tool: "echo", p: startStdio(b, plainBinary(b), append([]string{"-proxy", cmd}, args...), nil)})
	call := func(c *client.Client, name string) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, map[string]any{"message": message}
		res, err := c.CallTool(context.Background(), req)
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", name, res, err)
		}
	}
	for range 50 { // warm every path (JIT, schema compilation)
		for _, p := range paths {
			call(p.p.c, p.tool)
		}
	}
	for _, p := range paths {
		p.cpu0 = cpuTime(b, p.p.pid)
	}
	n := 0
	for b.Loop() {
		for _, p := range paths {
			t0 := time.Now()
			call(p.p.c, p.tool)
			p.t += time.Since(t0)
		}
		n++
	}
	direct := paths[0]
	b.ReportMetric(float64(direct.t.Microseconds())/float64(n), "direct-µs/call")
	for _, p := range paths[1:] {
		cpu := cpuTime(b, p.p.pid) - p.cpu0
		cpuName := p.name + "-cpu-µs/call"
		if p.name == "via" {
			p.name, cpuName = "via-bub", "bub-cpu-µs/call"
		}
		b.ReportMetric(float64(p.t.Microseconds())/float64(n), p.name+"-µs/call")
		b.ReportMetric(float64(p.t)/float64(direct.t), strings.TrimSuffix(p.name, "-bub")+"/direct")
		b.ReportMetric(float64(cpu.Microseconds())/float64(n), cpuName)
	}
}

// TestToolsListSizes measures the tools/list a client gets with
// server-everything, server-memory and server-filesystem mounted: served
// directly, deferred, and in code mode. Deferred and code mode must each
// stay within 20% of direct (the point of both).
func TestToolsListSizes(t *testing.T) {
	evCmd, evArgs := npmServer(t, "server-everything", "stdio")
	memCmd, memArgs := npmServer(t, "server-memory")
	fsCmd, fsArgs := npmServer(t, "server-filesystem", t.TempDir())
	servers := func(extra string) string {
		return stdioTable("everything", evCmd, evArgs, extra) + stdioTable("memory", memCmd, memArgs, extra) + stdioTable("files", fsCmd, fsArgs, extra)
	}
	size := func(src string, modules ...string) (bytes, tools, instructions int) {
		h := newHost(t, src, "", modules...)
		h.waitTool(t, "everything.trigger-elicitation-request") // the list settled
		via, _ := h.serve(t)
		res, err := via.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		v, err := h.View(t.Context(), h.conn)
		if err != nil {
			t.Fatal(err)
		}
		return len(b), len(res.Tools), len(v.Instructions)
	}
	direct, nDirect, iDirect := size(servers(""))
	deferred, nDeferred, iDeferred := size(servers("defer = true"))
	code, nCode, iCode := size(servers("")+"[profiles.default]\ncode_mode = true\n", "codemode")
	t.Logf("tools/list bytes (+ instructions): direct %d (%d tools, +%d), deferred %d (%d tools, %.1f%%, +%d catalog), code mode %d (%d tools, %.1f%%, +%d)",
		direct, nDirect, iDirect, deferred, nDeferred, 100*float64(deferred)/float64(direct), iDeferred, code, nCode, 100*float64(code)/float64(direct), iCode)
	if nCode == 0 || nCode >= nDirect {
		needCmd(t, "python3")
		t.Fatalf("code mode lists %d tools; want run_code only", nCode)
	}
	if deferred*5 > direct || code*5 > direct {
		t.Errorf("deferred (%d B) or code mode (%d B) above 20%% of direct (%d B)", deferred, code, direct)
	}
}

// TestPlainProxy checks the benchmark's floor: plainmcp -proxy serves its
// upstream's tools (here another plainmcp's echo) and forwards the calls.
func TestPlainProxy(t *testing.T) {
	bin := plainBinary(t)
	p := startStdio(t, bin, []string{"-proxy", bin}, nil)
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "echo", map[string]any{"message": "through"}
	res, err := p.c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("Echo: through")}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("echo through plainmcp -proxy (-want +got):\n%s", diff)
	}
}
