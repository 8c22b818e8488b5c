package codemode_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/host"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// benchRunCode calls run_code through a host once per iteration. The wait
// for the next pre-started interpreter is outside the timer, so ns/op is
// the latency of a run whose interpreter is ready, as between model turns;
// p50-ms and p90-ms report its distribution.
func benchRunCode(b *testing.B, code, want string) []time.Duration {
	needPython(b)
	factory, warm := codemode.TrackedLocalRunner(nil)
	h := newHost(b, hostOptions{runner: factory})
	conn, v := resolve(b, h, "default")
	rc, ok := v.Lookup("run_code")
	if !ok {
		b.Fatal("run_code not in the View")
	}
	a := args(b, map[string]any{"code": code})
	ctx := context.Background()
	run := func() registry.Result { return h.Call(ctx, conn, rc, registry.Call{Args: a}, nil) }
	if res := run(); res.Err != nil || res.Text != want { // creates the environment and its runner
		b.Fatalf("run_code = %q, %v; want %q", res.Text, res.Err, want)
	}
	var times []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := warm(ctx); err != nil {
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

// BenchmarkRunCodePrint is run_code of print(1) through the host: the
// View lookup, hooks, tape records, the environment and the runner.
func BenchmarkRunCodePrint(b *testing.B) {
	benchRunCode(b, "print(1)", "1\n")
}

// BenchmarkRunCodeNestedCall measures one nested call's round trip
// through the host (validation, hooks, tape records, JSON): each run makes
// 1000 sequential calls; ns/call is the run's p50 divided by 1000.
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

// BenchmarkCallNested is the host's share of one nested call, without
// Python: Host.CallNested (hooks, validation, handler) and the JSON the
// result is sent back as, with the context a run_code call provides.
func BenchmarkCallNested(b *testing.B) {
	h := newHost(b, hostOptions{})
	conn, v := resolve(b, h, "default")
	tool, ok := v.LookupCode("echo")
	if !ok {
		b.Fatal("echo is not a code tool")
	}
	sess, err := h.Session(conn)
	if err != nil {
		b.Fatal(err)
	}
	env, err := h.Environment(context.Background(), conn)
	if err != nil {
		b.Fatal(err)
	}
	ctx := host.WithConnection(sessions.NewContext(context.Background(), sess), conn)
	parent := &registry.ToolContext{SessionID: conn.SessionKey, RunID: "bench-1", Env: env}
	a := json.RawMessage(`{"i":5}`)
	b.ReportAllocs()
	for b.Loop() {
		res := h.CallNested(ctx, conn, tool, a, parent, nil)
		if res.Err != nil {
			b.Fatal(res.Err)
		}
		if _, err := json.Marshal(res.Value); err != nil {
			b.Fatal(err)
		}
	}
}
