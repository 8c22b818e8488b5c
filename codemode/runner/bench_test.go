package runner

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// benchRuns runs req once per iteration on a pre-started runner. The wait
// for the next pre-started interpreter is outside the timer, so ns/op is
// the latency of a run whose interpreter is ready, as between model turns;
// p50-ms and p90-ms report its distribution.
func benchRuns(b *testing.B, req Request, check func(out string)) []time.Duration {
	r := newTestRunner(b, true)
	ctx := context.Background()
	var times []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := r.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		out, err := r.Run(ctx, req)
		times = append(times, time.Since(start))
		if err != nil {
			b.Fatalf("Run: %v", err)
		}
		if check != nil {
			check(out)
		}
	}
	slices.Sort(times)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(times[len(times)/2]), "p50-ms")
	b.ReportMetric(ms(times[len(times)*9/10]), "p90-ms")
	return times
}

func BenchmarkRunPrint(b *testing.B) {
	benchRuns(b, Request{Code: "print(1)"}, func(out string) {
		if out != "1\n" {
			b.Fatalf("output = %q", out)
		}
	})
}

// BenchmarkRunPrintCold runs without pre-starting: every run pays the
// interpreter's start-up and imports.
func BenchmarkRunPrintCold(b *testing.B) {
	r := newTestRunner(b, false)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Run(context.Background(), Request{Code: "print(1)"}); err != nil {
			b.Fatal(err)
		}
	}
}

func echoBench(_ context.Context, _ string, args json.RawMessage) (json.RawMessage, error) {
	return args, nil
}

// BenchmarkNestedCall measures one tool call's round trip: each run makes
// 1000 sequential calls; ns/call is the run's time divided by 1000.
func BenchmarkNestedCall(b *testing.B) {
	const calls = 1000
	code := "for i in range(1000):\n    r = await tools.echo(i=i)\nprint(r['i'])"
	times := benchRuns(b, Request{Code: code, Tools: []string{"echo"}, Call: echoBench}, func(out string) {
		if out != "999\n" {
			b.Fatalf("output = %q", out)
		}
	})
	b.ReportMetric(float64(times[len(times)/2])/calls, "ns/call")
}

// BenchmarkGather100 runs 100 concurrent calls from asyncio.gather.
func BenchmarkGather100(b *testing.B) {
	code := "import asyncio\nrs = await asyncio.gather(*(tools.echo(i=i) for i in range(100)))\nprint(len(rs))"
	benchRuns(b, Request{Code: code, Tools: []string{"echo"}, Call: echoBench}, func(out string) {
		if out != "100\n" {
			b.Fatalf("output = %q", out)
		}
	})
}
