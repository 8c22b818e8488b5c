package console

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/audit"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLiveFeedCost is the CPU an audited call costs with and without
// a console following the log, with one live page (an SSE client reading
// /calls/events) open. Calls are written at about 1000 a second, as a busy
// server would, so the console's polling is counted too. The metric
// cpu-µs/call is the whole process's CPU time (getrusage) per call: the
// difference between the two is what the console adds; the SSE client's
// reading is in it, so it is an upper bound.
func BenchmarkLiveFeedCost(b *testing.B) {
	for _, attached := range []bool{false, true} {
		name := "no-console"
		if attached {
			name = "console-with-live-page"
		}
		b.Run(name, func(b *testing.B) {
			var l *audit.Log
			var f *fixture
			if attached {
				f = newFixtureIn(b, b.TempDir(), plainConfig, true)
				l = f.log
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/console/calls/events", nil)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				go func() { io.Copy(io.Discard, res.Body); res.Body.Close() }()
			} else {
				var err error
				l, err = audit.Open(audit.Options{Dir: filepath.Join(b.TempDir(), "audit"), CommitInterval: 5 * time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
			}
			b.ResetTimer()
			start := cpuTime(b)
			for i := 0; i < b.N; i++ {
				l.Record(rec("fs.read", "bench", "ok", `{"path":"src/main.go","offset":0,"limit":200}`))
				time.Sleep(time.Millisecond)
			}
			if err := l.Flush(); err != nil {
				b.Fatal(err)
			}
			if attached {
				for f.c.feed.lastSeq() < int64(b.N) { // the console has seen every call
					time.Sleep(time.Millisecond)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/float64(b.N), "cpu-µs/call")
		})
	}
}
