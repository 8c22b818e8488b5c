package sessions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestGroupCommitWaitsOneInterval: an AppendAsync entry reaches the file
// one commit interval after it was queued, not before, so a burst lands
// in one write; Flush does not wait for the interval. Time is the
// variable here, so the test runs on synctest's fake clock: an hour-long
// interval passes at once and the instants are exact.
func TestGroupCommitWaitsOneInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		home := t.TempDir()
		s := openStore(t, home, &Options{CommitInterval: time.Hour, Logger: (&logBuffer{}).logger()})
		tp := session(t, s, t.TempDir(), "burst").Tape()
		lines := func() int {
			t.Helper()
			paths, err := filepath.Glob(filepath.Join(home, "tapes", "*.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, p := range paths {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				n += strings.Count(string(b), "\n")
			}
			return n
		}
		for i := range 3 {
			if err := tp.AppendAsync(KindEvent, eventPayload("loop.step", map[string]any{"i": i}), nil); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Hour - time.Second)
		synctest.Wait()
		if n := lines(); n != 0 {
			t.Errorf("%d lines on disk a second before the interval ends; want 0", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := lines(); n != 3 {
			t.Errorf("%d lines on disk once the interval ended; want the burst's 3", n)
		}
		if err := tp.AppendAsync(KindEvent, eventPayload("loop.step", map[string]any{"i": 3}), nil); err != nil {
			t.Fatal(err)
		}
		if err := tp.Flush(); err != nil {
			t.Fatal(err)
		}
		if n := lines(); n != 4 {
			t.Errorf("%d lines on disk after Flush; want 4 at once", n)
		}
	})
}
