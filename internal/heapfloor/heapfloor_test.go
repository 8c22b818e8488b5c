package heapfloor

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, tt := range []struct {
		live, roots, floor uint64
		want               int
	}{
		{live: 1 << 20, roots: 2 << 20, floor: 16 << 20, want: 400},  // the minimum heap reaches the floor first
		{live: 6 << 20, roots: 6 << 20, floor: 16 << 20, want: 166},  // live + roots×GOGC/100 does
		{live: 6 << 20, roots: 10 << 20, floor: 16 << 20, want: 100}, // stacks and globals count too
		{live: 8 << 20, roots: 8 << 20, floor: 16 << 20, want: 100},  // the default already reaches the floor
		{live: 64 << 20, roots: 64 << 20, floor: 16 << 20, want: 100},
		{live: 0, roots: 0, floor: 16 << 20, want: 100},
	} {
		if got := percent(tt.live, tt.roots, tt.floor); got != tt.want {
			t.Errorf("percent(%d, %d, %d) = %d; want %d", tt.live, tt.roots, tt.floor, got, tt.want)
		}
	}
}

// TestKeep runs in a fresh process each time (the floor lasts for the
// process): with a 64 MiB floor, 48 MiB of small garbage takes at most a
// couple of collections where GOGC=100 takes a dozen; with GOGC set in the
// environment Keep leaves the collector alone, GOGC stays 100 through
// those collections. (That case compared collection counts too, which a
// loaded machine moves: 11 before and 4 after once, under make test.)
func TestKeep(t *testing.T) {
	if os.Getenv("HEAPFLOOR_CHILD") != "" {
		keepChild()
		return
	}
	for _, tt := range []struct {
		name, gogc string
		wantFew    bool
	}{{"floor", "", true}, {"GOGC set", "100", false}} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestKeep$", "-test.count=1")
			cmd.Env = append(os.Environ(), "HEAPFLOOR_CHILD=1", "GOGC="+tt.gogc, "GOMEMLIMIT=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var before, after, gogc int
			if _, err := fmt.Sscanf(lastLine(out), "collections %d %d gogc %d", &before, &after, &gogc); err != nil {
				t.Fatalf("child said %q: %v", out, err)
			}
			t.Logf("collections for 48 MiB of garbage: %d before Keep, %d after; GOGC then %d", before, after, gogc)
			// Relative bounds: how often GOGC=100 collects depends on the
			// child's live heap, which a loaded machine and -race move.
			switch {
			case !tt.wantFew:
				if gogc != 100 {
					t.Errorf("GOGC %d after Keep and %d collections; want 100 (GOGC set: no floor)", gogc, after)
				}
			case before < 6:
				t.Errorf("%d collections before Keep; want >= 6 for 48 MiB at GOGC=100", before)
			case after > 2 || 4*after > before || gogc <= 100:
				t.Errorf("%d collections after Keep (GOGC %d); want at most 2 and a quarter of the %d before", after, gogc, before)
			}
		})
	}
}

// keepChild measures collections before and after Keep and prints both.
func keepChild() {
	before := collections(48 << 20)
	Keep(os.Getenv, 64<<20)
	runtime.GC() // the first adjustment follows the first collection
	wait := 5 * time.Second
	if os.Getenv("GOGC") != "" {
		wait = 500 * time.Millisecond // time for an adjustment there should not be
	}
	waitPercent(wait)
	after := collections(48 << 20)
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(gogc)
	fmt.Printf("\ncollections %d %d gogc %d\n", before, after, gogc[0].Value.Uint64())
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "collections ") {
			return lines[i]
		}
	}
	return ""
}

// collections allocates n bytes of short-lived 4 KiB objects and returns
// how many collections ran meanwhile.
func collections(n int) uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	start := m.NumGC
	for i := 0; i < n/4096; i++ {
		sink = make([]byte, 4096)
	}
	runtime.ReadMemStats(&m)
	return m.NumGC - start
}

var sink []byte

// waitPercent waits (up to wait) for the finalizer goroutine to have
// raised GOGC.
func waitPercent(wait time.Duration) {
	deadline := time.Now().Add(wait)
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	for time.Now().Before(deadline) {
		if metrics.Read(gogc); gogc[0].Value.Uint64() > 100 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
