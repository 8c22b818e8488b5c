package reclaim

import (
	"math"
	"runtime/debug"
	"testing"
)

// One Reclaimer per process: overlapping large messages, from one server
// or two sharing it, hold the memory limit down while any is in flight and
// put back the limit in force before the first. (Two Reclaimers, one per
// Server as before, interleaved: B saves A's temporary limit as "the limit
// before" and restores it last, leaving the process at ~20 MB; the single
// owner rules that out.)
func TestLimitRestoredAfterOverlap(t *testing.T) {
	const before = 1 << 40
	old := debug.SetMemoryLimit(before)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	const msg = 4 << 20

	shared := New()
	end1 := shared.Begin(msg) // server A
	end2 := shared.Begin(msg) // server B, same process
	if got := debug.SetMemoryLimit(-1); got >= before {
		t.Fatalf("limit during two large messages = %d; want it held below %d", got, int64(before))
	}
	end1()
	if got := debug.SetMemoryLimit(-1); got >= before {
		t.Errorf("limit with one message left = %d; want it still held", got)
	}
	end2()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit after both = %d; want %d restored", got, int64(before))
	}

	debug.SetMemoryLimit(before)
}

// A nil Reclaimer (a Server without one) and small messages cost nothing
// and change nothing.
func TestNilAndSmall(t *testing.T) {
	old := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	var r *Reclaimer
	r.Begin(64 << 20)()
	New().Begin(Threshold - 1)()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit = %d; want it untouched", got)
	}
}
