package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// pairedWires are the wires the speed goals name: each transport on the
// 2025-11-25 session protocol and on the sessionless 2026-07-28 one.
var pairedWires = []struct{ transport, protocol string }{
	{"stdio", mcp.LATEST_PROTOCOL_VERSION},
	{"stdio", "2025-11-25"},
	{"http", mcp.LATEST_PROTOCOL_VERSION},
	{"http", "2025-11-25"},
}

// TestHarnessProtocol checks that a pinned protocol version is what both
// servers negotiate on both transports, as BenchmarkEchoPaired needs, and
// that an HTTP server takes a second client (BenchmarkEchoClients).
func TestHarnessProtocol(t *testing.T) {
	skipShort(t)
	for _, w := range pairedWires {
		for _, kind := range kinds {
			t.Run(w.transport+"/"+w.protocol+"/"+kind, func(t *testing.T) {
				t.Parallel()
				s, err := startServerProtocol(t.Context(), binary(t, kind), kind, w.transport, t.TempDir(), w.protocol)
				if err != nil {
					t.Fatal(err)
				}
				defer s.stop()
				if s.protocol != w.protocol {
					t.Errorf("negotiated %q, want %q", s.protocol, w.protocol)
				}
				if err := s.echo(t.Context(), echoRequest("pinned")); err != nil {
					t.Error(err)
				}
				if w.transport != "http" {
					return
				}
				c, err := s.connect(t.Context(), "second")
				if err != nil {
					t.Fatal(err)
				}
				if err := s.echoOn(t.Context(), c, echoRequest("second client")); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// pairedRounds is how many turns each server gets in one run.
const pairedRounds = 10

// BenchmarkEchoPaired runs bub-mcp and plain mcp-go side by side: both
// servers are up at once, and they take turns, pairedRounds rounds of
// b.N/pairedRounds echo calls each, so that both see the same moments of
// the machine. On a shared VM the same binary's CPU per call moves by up
// to 1.5× between minutes, which BenchmarkEcho's one-kind-after-the-other
// runs cannot tell from a difference between the servers.
//
// It reports each server's CPU per call (scheduler run time of all its
// threads) and calls/s, and bub/plain for both: the figures issue 11's
// speed goals are stated in.
func BenchmarkEchoPaired(b *testing.B) {
	setup(b)
	for _, w := range pairedWires {
		for _, c := range concurrency {
			b.Run(fmt.Sprintf("%s/%s/c=%d", w.transport, w.protocol, c), func(b *testing.B) {
				benchPaired(b, w.transport, w.protocol, c, 1)
			})
		}
	}
}

// manyClients is how many clients BenchmarkEchoClients connects.
const manyClients = 32

// BenchmarkEchoClients is BenchmarkEchoPaired with manyClients clients
// of one HTTP server, each making one call at a time: on the 2025
// protocol as many sessions, each with its own Environment and tape, as
// when many IDE windows share one server.
func BenchmarkEchoClients(b *testing.B) {
	setup(b)
	for _, w := range pairedWires {
		if w.transport != "http" {
			continue
		}
		b.Run(fmt.Sprintf("%s/%s/clients=%d", w.transport, w.protocol, manyClients), func(b *testing.B) {
			benchPaired(b, w.transport, w.protocol, 1, manyClients)
		})
	}
}

// benchPaired is BenchmarkEchoPaired's and BenchmarkEchoClients' run:
// conc goroutines share each server's first client, and each of the
// other clients-1 makes one call at a time.
func benchPaired(b *testing.B, tr, protocol string, conc, clients int) {
	ctx := context.Background()
	servers := map[string]*server{}
	load := map[string]func(n int) error{}
	for _, kind := range kinds {
		s, err := startServerProtocol(ctx, binary(b, kind), kind, tr, b.TempDir(), protocol)
		if err != nil {
			b.Fatal(err)
		}
		defer s.stop()
		if s.protocol != protocol {
			b.Fatalf("%s %s: negotiated %s, want %s", kind, tr, s.protocol, protocol)
		}
		cs := slices.Repeat([]*client.Client{s.client}, conc)
		for i := 1; i < clients; i++ {
			c, err := s.connect(ctx, fmt.Sprintf("bench-client-%d", i))
			if err != nil {
				b.Fatal(err)
			}
			cs = append(cs, c)
		}
		load[kind] = func(n int) error { return callClients(ctx, s, cs, echoRequest("hello from the benchmark"), n) }
		if err := load[kind](warmupCalls); err != nil {
			b.Fatal(err)
		}
		servers[kind] = s
	}
	per := max(b.N/pairedRounds, 1)
	cpu := map[string]time.Duration{}
	wall := map[string]time.Duration{}
	b.ResetTimer()
	for i := range pairedRounds {
		for k := range kinds {
			// Who goes first alternates, as in BenchmarkColdStart.
			s := servers[kinds[(i+k)%len(kinds)]]
			c0, err := s.schedCPU()
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := load[s.kind](per); err != nil {
				b.Fatalf("%v\nserver stderr:\n%s", err, s.stderr)
			}
			wall[s.kind] += time.Since(t0)
			c1, err := s.schedCPU()
			if err != nil {
				b.Fatal(err)
			}
			cpu[s.kind] += c1 - c0
		}
	}
	b.StopTimer()
	n := float64(per * pairedRounds)
	perCall := func(kind string) float64 { return float64(cpu[kind].Nanoseconds()) / 1e3 / n }
	rate := func(kind string) float64 { return n / wall[kind].Seconds() }
	b.ReportMetric(perCall(bub), "bub-cpu-µs/call")
	b.ReportMetric(perCall(plain), "plain-cpu-µs/call")
	b.ReportMetric(perCall(bub)/perCall(plain), "cpu-bub/plain")
	b.ReportMetric(rate(bub), "bub-calls/s")
	b.ReportMetric(rate(plain), "plain-calls/s")
	b.ReportMetric(rate(bub)/rate(plain), "calls/s-bub/plain")
	b.ReportMetric(0, "ns/op") // b.N's timing covers both servers: not a figure of either
}
