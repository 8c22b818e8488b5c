package codemode_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/registry"
)

// benchRunCode calls run_code through the App once per iteration. The
// wait for the next pre-started interpreter is outside the timer, so ns/op
// is the latency of a run whose interpreter is ready, as between model
// turns; p50-ms and p90-ms report its distribution.
func benchRunCode(b *testing.B, code, want string) []time.Duration {
	needPython(b)
	a, m := newApp(b, appOptions{})
	conn, v := resolve(b, a, "default")
	if _, ok := v.Lookup("run_code"); !ok {
		b.Fatal("run_code not in the View")
	}
	in := args(b, map[string]any{"code": code})
	ctx := context.Background()
	run := func() registry.Result { return a.Call(ctx, conn, app.Request{Tool: "run_code", Args: in}) }
	if res := run(); res.Err != nil || res.Text != want { // creates the environment and its runner
		b.Fatalf("run_code = %q, %v; want %q", res.Text, res.Err, want)
	}
	var times []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := m.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		res := run()
		times = append(times, time.Since(start))
		if res.Err != nil || res.Text != want {
			b.Fatalf("run_code = %q, %v; want %q", res.Text, res.Err, want)
		}
	}
	slices.Sort(times)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(times[len(times)/2]), "p50-ms")
	b.ReportMetric(ms(times[len(times)*9/10]), "p90-ms")
	return times
}

// BenchmarkRunCodePrint is run_code of print(1) through the App: the
// View lookup, hooks, tape records, the environment and the runner.
func BenchmarkRunCodePrint(b *testing.B) {
	benchRunCode(b, "print(1)", "1\n")
}

// BenchmarkRunCodeNestedCall measures one nested call's round trip
// through the App (validation, hooks, JSON): each run makes 1000
// sequential calls; ns/call is the run's p50 divided by 1000.
func BenchmarkRunCodeNestedCall(b *testing.B) {
	const calls = 1000
	code := "for i in range(1000):\n    r = await tools.echo(i=i)\nprint(r['i'])"
	times := benchRunCode(b, code, "999\n")
	b.ReportMetric(float64(times[len(times)/2])/calls, "ns/call")
}

// BenchmarkRunCodeGather100 runs 100 concurrent nested calls gathered
// with asyncio.gather.
func BenchmarkRunCodeGather100(b *testing.B) {
	code := "import asyncio\nrs = await asyncio.gather(*(tools.orders_get(order_id=str(i)) for i in range(100)))\nprint(len(rs))"
	benchRunCode(b, code, "100\n")
}

// BenchmarkCallNested is the App's share of one nested call, without
// Python: ToolContext.Tools.Call (lookup in the View, hooks, validation,
// handler) and the JSON the result is sent back as. The ToolContext is
// the one a direct call gets, taken from a preserved tool.
func BenchmarkCallNested(b *testing.B) {
	reg := testRegistry(b, nil)
	var tools registry.Tools
	reg.MustRegister(rawTool(b, "capture", func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		tools = tc.Tools
		return "ok", nil
	}, registry.WithPreserve()))
	a, _ := newApp(b, appOptions{reg: reg})
	conn, _ := resolve(b, a, "default")
	if res := a.Call(context.Background(), conn, app.Request{Tool: "capture"}); res.Err != nil || tools == nil {
		b.Fatalf("capture = %v; tools %v", res.Err, tools)
	}
	in := json.RawMessage(`{"i":5}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res := tools.Call(ctx, "echo", in)
		if res.Err != nil {
			b.Fatal(res.Err)
		}
		if _, err := json.Marshal(res.Value); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunCodeBurst is run_code of print(1) used in earnest, on each
// environment: 10 calls back to back by one caller, and 4 callers making
// 5 calls each at once, timed per call; the pool is full before each
// burst (outside the timer). It reports the p50 of each burst kind in ms,
// next to a cold `python3 -c pass` (through PATH, as a user would run it)
// measured in the same run (and of the real executable behind it), and
// the ratio of the worse burst p50 to the cold start.
func BenchmarkRunCodeBurst(b *testing.B) {
	for _, env := range envKinds {
		b.Run(env, func(b *testing.B) {
			if env == "sandbox" {
				testenv.MustHaveBwrap(b)
			}
			needPython(b)
			a, m := newApp(b, appOptions{env: env})
			conn, _ := resolve(b, a, "default")
			in := args(b, map[string]any{"code": "print(1)"})
			ctx := context.Background()
			call := func() time.Duration {
				start := time.Now()
				res := a.Call(ctx, conn, app.Request{Tool: "run_code", Args: in})
				d := time.Since(start)
				if res.Err != nil || res.Text != "1\n" {
					b.Errorf("run_code = %q, %v", res.Text, res.Err)
				}
				return d
			}
			call() // makes the environment and its runner
			real, err := environment.ResolvePython("python3")
			if err != nil {
				b.Fatal(err)
			}
			var serial, parallel, cold, coldReal []time.Duration
			var mu sync.Mutex
			for b.Loop() {
				b.StopTimer()
				if err := m.WaitReady(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for range 10 {
					serial = append(serial, call())
				}
				b.StopTimer()
				if err := m.WaitReady(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for range 5 {
							d := call()
							mu.Lock()
							parallel = append(parallel, d)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				start := time.Now()
				if err := exec.Command("python3", "-c", "pass").Run(); err != nil {
					b.Fatal(err)
				}
				cold = append(cold, time.Since(start))
				start = time.Now()
				if err := exec.Command(real, "-c", "pass").Run(); err != nil {
					b.Fatal(err)
				}
				coldReal = append(coldReal, time.Since(start))
				b.StartTimer()
			}
			p50 := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2]) / float64(time.Millisecond)
			}
			s, p, c := p50(serial), p50(parallel), p50(cold)
			b.ReportMetric(s, "serial-p50-ms")
			b.ReportMetric(p, "c4-p50-ms")
			b.ReportMetric(c, "cold-python-ms")
			b.ReportMetric(p50(coldReal), "cold-real-python-ms")
			b.ReportMetric(max(s, p)/c, "worst/cold")
		})
	}
}
