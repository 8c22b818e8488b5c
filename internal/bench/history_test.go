package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/mark3labs/mcp-go/mcp"
)

// historyCalls is how many calls the long-history homes hold.
const historyCalls = 100_000

// BenchmarkHistoryStart measures what a long history costs bub-mcp's start
// over stdio: spawn → initialize → first tools/list (cold-ms) and VmRSS
// 200 ms after it (idle-RSS-MiB), each the mean of a few process lives,
// for three $BUB_HOMEs:
//
//   - fresh: nothing in it;
//   - calls-100k: after 100,000 real echo calls through this build (their
//     audit log is 100,000 lines; the session tape holds none of them);
//   - legacy-tape-100k: the default session's tape holding the 200,000
//     audit entries earlier versions wrote for 100,000 calls (about 60 MB).
//     Its first start reads it once to build the tape's snapshot
//     (first-cold-ms); the starts measured after that read only the
//     snapshot.
//
// The goal (issue 12): cold start and RSS after 100,000 calls within
// 1.2× fresh. Nothing is asserted.
func BenchmarkHistoryStart(b *testing.B) {
	skipShort(b)
	bin := binary(b, bub)
	ctx := context.Background()
	homes := []struct {
		name    string
		prepare func(b *testing.B, dir string) // may start servers itself
	}{
		{"fresh", func(*testing.B, string) {}},
		{"calls-100k", func(b *testing.B, dir string) {
			s, err := startServer(ctx, bin, bub, "stdio", dir)
			if err != nil {
				b.Fatal(err)
			}
			defer s.stop()
			if err := callN(ctx, s, echoRequest("history"), historyCalls, 8); err != nil {
				b.Fatal(err)
			}
		}},
		{"legacy-tape-100k", func(b *testing.B, dir string) {
			writeLegacyTape(b, dir, historyCalls)
		}},
	}
	for _, h := range homes {
		b.Run(h.name, func(b *testing.B) {
			dir := b.TempDir()
			for _, d := range []string{"home", "ws"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			h.prepare(b, dir)
			first, _ := coldStart(b, bin, dir) // builds any snapshot
			const n = 10
			var total time.Duration
			var rss int64
			for range n {
				d, m := coldStart(b, bin, dir)
				total += d
				rss += m.rss
			}
			b.ReportMetric(float64(first.Microseconds())/1e3, "first-cold-ms")
			b.ReportMetric(float64(total.Microseconds())/1e3/n, "cold-ms")
			b.ReportMetric(float64(rss)/n/(1<<20), "idle-RSS-MiB")
			b.ReportMetric(float64(total.Nanoseconds())/n, "ns/op")
		})
	}
}

// coldStart runs one server life: start, first tools/list (timed), idle,
// read its memory, stop.
func coldStart(b *testing.B, bin, dir string) (time.Duration, mem) {
	ctx := context.Background()
	t0 := time.Now()
	s, err := startServer(ctx, bin, bub, "stdio", dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.stop()
	list, err := s.client.ListTools(ctx, mcp.ListToolsRequest{})
	d := time.Since(t0)
	if err != nil || len(list.Tools) == 0 {
		b.Fatalf("tools/list = %v, %v\nstderr: %s", list, err, s.stderr)
	}
	time.Sleep(idleWait)
	m, err := s.memory()
	if err != nil {
		b.Fatal(err)
	}
	return d, m
}

// writeLegacyTape writes the default session's tape as versions before
// the separate audit log left it after calls calls: a session/start
// anchor, then a tool_call and a tool_result per call.
func writeLegacyTape(b *testing.B, dir string, calls int) {
	ws, err := filepath.EvalSymlinks(filepath.Join(dir, "ws"))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "home", "tapes", sessions.TapeName(ws, "mcp:default")+".jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	date := "2026-01-02T03:04:05.123456789Z"
	fmt.Fprintf(&sb, `{"id":1,"kind":"anchor","payload":{"name":"session/start","state":{"owner":"human"}},"meta":{},"date":%q}`+"\n", date)
	id := 2
	for i := range calls {
		meta := fmt.Sprintf(`{"client":"bub-mcp-bench/dev","profile":"default","run_id":"stdio-%d","transport":"stdio"}`, i+1)
		fmt.Fprintf(&sb, `{"id":%d,"kind":"tool_call","payload":{"calls":[{"function":{"arguments":{"message":"history"},"name":"echo"},"id":"stdio-%d","type":"function"}]},"meta":%s,"date":%q}`+"\n", id, i+1, meta, date)
		fmt.Fprintf(&sb, `{"id":%d,"kind":"tool_result","payload":{"results":[{"call_id":"stdio-%d","elapsed_ms":0,"output":"Echo: history","status":"ok"}]},"meta":%s,"date":%q}`+"\n", id+1, i+1, meta, date)
		id += 2
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
}
