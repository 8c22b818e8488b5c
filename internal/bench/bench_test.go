package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

var (
	transports  = []string{"stdio", "http"}
	concurrency = []int{1, 8, 32}
)

// idleWait is how long a server idles after its first tools/list before
// its RSS is read.
const idleWait = 200 * time.Millisecond

func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("bench: spawns server processes; skipped with -short")
	}
}

// setup skips in -short mode and builds the binaries before any
// sub-benchmark's timer runs.
func setup(b *testing.B) {
	b.Helper()
	skipShort(b)
	for _, k := range kinds {
		binary(b, k)
	}
}

// TestHarnessEcho checks the harness end to end: both binaries build, start
// on both transports, list and answer echo (also concurrently), and their
// CPU and memory can be read.
func TestHarnessEcho(t *testing.T) {
	skipShort(t)
	for _, tr := range transports {
		for _, kind := range kinds {
			t.Run(tr+"/"+kind, func(t *testing.T) {
				t.Parallel()
				s := start(t, kind, tr)
				t.Logf("pid %d, protocol %s, session %q", s.pid, s.protocol, s.client.GetSessionId())
				ctx := t.Context()
				list, err := s.client.ListTools(ctx, mcp.ListToolsRequest{})
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				if !slices.ContainsFunc(list.Tools, func(tl mcp.Tool) bool { return tl.Name == "echo" }) {
					t.Fatalf("tools/list has no echo tool: %d tools", len(list.Tools))
				}
				if err := s.echo(ctx, echoRequest("hello")); err != nil {
					t.Fatal(err)
				}
				if err := callN(ctx, s, echoRequest("concurrent"), 40, 8); err != nil {
					t.Fatal(err)
				}
				if cpu, err := s.cpu(); err != nil || cpu < 0 {
					t.Errorf("cpu() = %v, %v; want >= 0, nil", cpu, err)
				}
				if sched, err := s.schedCPU(); err != nil || sched <= 0 {
					t.Errorf("schedCPU() = %v, %v; want > 0, nil", sched, err)
				}
				if m, err := s.memory(); err != nil || m.rss <= 0 || m.hwm < m.rss || m.anon <= 0 || m.file <= 0 {
					t.Errorf("memory() = %+v, %v; want 0 < rss <= hwm, anon and file > 0", m, err)
				}
			})
		}
	}
}

// callN makes n echo calls from conc goroutines sharing one client.
func callN(ctx context.Context, s *server, req mcp.CallToolRequest, n, conc int) error {
	return callClients(ctx, s, slices.Repeat([]*client.Client{s.client}, conc), req, n)
}

// callClients makes n echo calls, one goroutine for each of cs making
// one at a time (cs may name one client several times).
func callClients(ctx context.Context, s *server, cs []*client.Client, req mcp.CallToolRequest, n int) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for _, c := range cs {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := s.echoOn(ctx, c, req); err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// BenchmarkEcho measures the echo tool at 1, 8 and 32 concurrent calls on
// one client. Every run gets a fresh server, warmed up with warmupCalls
// calls (its session, environment and tape exist, its threads run), so the
// figures do not depend on how many calls earlier runs left in bub-mcp's
// in-memory tape; server-RSS-MiB shows what the run left behind.
func BenchmarkEcho(b *testing.B) {
	setup(b)
	for _, tr := range transports {
		for _, kind := range kinds {
			for _, c := range concurrency {
				b.Run(fmt.Sprintf("%s/%s/c=%d", tr, kind, c), func(b *testing.B) { benchCalls(b, kind, tr, c) })
			}
		}
	}
}

// warmupCalls are made, 32 at a time, before each measured run.
const warmupCalls = 500

func benchCalls(b *testing.B, kind, tr string, conc int) {
	b.ReportAllocs()
	ctx := context.Background()
	s, err := startServer(ctx, binary(b, kind), kind, tr, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.stop()
	if err := callN(ctx, s, echoRequest("warm-up"), warmupCalls, 32); err != nil {
		b.Fatal(err)
	}
	req := echoRequest("hello from the benchmark")
	cpu0, err := s.cpu()
	if err != nil {
		b.Fatal(err)
	}
	sched0, schedErr := s.schedCPU()
	self0 := selfCPU()
	b.ResetTimer()
	t0 := time.Now()
	err = callN(ctx, s, req, b.N, conc)
	elapsed := time.Since(t0)
	b.StopTimer()
	if err != nil {
		b.Fatalf("%v\nserver stderr:\n%s", err, s.stderr)
	}
	self1 := selfCPU()
	cpu1, err := s.cpu()
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/n, "server-cpu-µs/call")
	if schedErr == nil {
		if sched1, err := s.schedCPU(); err == nil {
			b.ReportMetric(float64((sched1-sched0).Nanoseconds())/1e3/n, "sched-cpu-µs/call")
		}
	}
	b.ReportMetric(float64((self1-self0).Nanoseconds())/1e3/n, "client-cpu-µs/call")
	b.ReportMetric(n/elapsed.Seconds(), "calls/s")
	if m, err := s.memory(); err == nil {
		b.ReportMetric(float64(m.rss)/(1<<20), "server-RSS-MiB")
	}
}

// Each iteration of BenchmarkColdStart and BenchmarkIdleRSS is a server
// process's whole life, so a run takes at most this many samples whatever
// b.N is, and reports their mean as ns/op. The caps are above what a 1s
// -benchtime asks for; they only bound iteration counts meant for
// BenchmarkEcho, such as -benchtime 5000x.
const (
	maxColdStarts = 200
	maxIdleRSS    = 10
)

// BenchmarkColdStart measures spawn → initialize → first tools/list, the
// latency an MCP client sees before it can offer the tools, on each
// transport and protocol era of pairedWires: 2025-11-25 is the sequential
// handshake the official SDK clients make (initialize, wait for the
// answer, notifications/initialized, tools/list), 2026-07-28 the
// sessionless one (server/discover, tools/list). Shutting the server down
// is not timed. bub-mcp (cmd/bub-mcp, as users run it) and the plain
// mcp-go server start in turn (paired rounds, so that both see the same
// machine), each kind reusing one $BUB_HOME, as a user's machine would.
// It reports each kind's mean from spawn to the list's answer (-ms/op)
// and bub/plain, their ratio, and each kind's mean from the handshake's
// end to the list's answer (-list-ms): the part of the start a server
// spends on its first tools/list rather than on starting up.
func BenchmarkColdStart(b *testing.B) {
	setup(b)
	for _, w := range pairedWires {
		b.Run(w.transport+"/"+w.protocol, func(b *testing.B) {
			bins := map[string]string{bub: serveBinary(b), plain: binary(b, plain)}
			dirs := map[string]string{bub: b.TempDir(), plain: b.TempDir()}
			total, list := map[string]time.Duration{}, map[string]time.Duration{}
			ctx := context.Background()
			n := min(b.N, maxColdStarts)
			for i := range n {
				for k := range kinds {
					// Who goes first alternates, so neither always
					// starts on the caches the other warmed.
					kind := kinds[(i+k)%len(kinds)]
					t0 := time.Now()
					s, err := startServerProtocol(ctx, bins[kind], kind, w.transport, dirs[kind], w.protocol)
					if err != nil {
						b.Fatal(err)
					}
					tools, err := s.client.ListTools(ctx, mcp.ListToolsRequest{})
					t1 := time.Now()
					total[kind] += t1.Sub(t0)
					list[kind] += t1.Sub(s.initialized)
					s.stop()
					if err != nil || len(tools.Tools) == 0 {
						b.Fatalf("%s %s: tools/list = %v, %v\nstderr: %s", kind, w.transport, tools, err, s.stderr)
					}
				}
			}
			mean := func(d map[string]time.Duration, kind string) float64 {
				return float64(d[kind].Nanoseconds()) / float64(n) / 1e6
			}
			b.ReportMetric(mean(total, bub), "bub-ms/op")
			b.ReportMetric(mean(total, plain), "plain-ms/op")
			b.ReportMetric(mean(total, bub)/mean(total, plain), "bub/plain")
			b.ReportMetric(mean(list, bub), "bub-list-ms")
			b.ReportMetric(mean(list, plain), "plain-list-ms")
			b.ReportMetric(0, "ns/op") // b.N's timing is not the figure: starts are capped and paired
		})
	}
}

// BenchmarkIdleRSS starts a server, initializes, lists the tools once,
// lets it idle for idleWait and reads its resident memory (VmRSS), its
// peak so far (VmHWM), and VmRSS's two parts: anonymous memory (heap,
// stacks) and file-backed pages (the mapped binary and libc).
func BenchmarkIdleRSS(b *testing.B) {
	setup(b)
	for _, tr := range transports {
		for _, kind := range kinds {
			b.Run(tr+"/"+kind, func(b *testing.B) {
				bin := binary(b, kind)
				dir := b.TempDir()
				ctx := context.Background()
				var sum mem
				var total time.Duration
				n := min(b.N, maxIdleRSS)
				for range n {
					t0 := time.Now()
					s, err := startServer(ctx, bin, kind, tr, dir)
					if err != nil {
						b.Fatal(err)
					}
					_, err = s.client.ListTools(ctx, mcp.ListToolsRequest{})
					var m mem
					if err == nil {
						time.Sleep(idleWait)
						m, err = s.memory()
					}
					s.stop()
					total += time.Since(t0)
					if err != nil {
						b.Fatalf("%s %s: %v\nstderr: %s", kind, tr, err, s.stderr)
					}
					sum.rss, sum.hwm, sum.anon, sum.file = sum.rss+m.rss, sum.hwm+m.hwm, sum.anon+m.anon, sum.file+m.file
				}
				mib := func(v int64) float64 { return float64(v) / float64(n) / (1 << 20) }
				b.ReportMetric(float64(total.Nanoseconds())/float64(n), "ns/op")
				b.ReportMetric(mib(sum.rss), "idle-RSS-MiB")
				b.ReportMetric(mib(sum.hwm), "peak-RSS-MiB")
				b.ReportMetric(mib(sum.anon), "anon-RSS-MiB")
				b.ReportMetric(mib(sum.file), "file-RSS-MiB")
			})
		}
	}
}
