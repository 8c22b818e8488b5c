// Package heapfloor keeps Go's garbage collector from running while the
// heap is small.
//
// With GOGC=100 the collector runs whenever the heap has doubled since the
// last collection, and at least every 4 MiB. A server whose live heap is
// 1-2 MiB and whose calls allocate ~13 KB each then collects every ~150
// calls; with 32 calls in flight that was a fifth of bub-mcp's CPU per call
// (internal/bench's BenchmarkEchoPaired). Keep raises GOGC while the live
// heap is under half the floor, so that the next collection comes at about
// the floor, and leaves it at 100 above that: a large message is collected
// as it would be without Keep. The technique is cmd/compile's
// AdjustStartingHeap (golang/go#56546), kept for the life of the process.
package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Default is the floor bub-mcp serve keeps: the heap may grow to 16 MiB
// between collections, a few MiB of memory for the CPU above.
const Default = 16 << 20

var once sync.Once

// Keep holds the heap goal at floor bytes or more for the life of the
// process. It does nothing when GOGC or GOMEMLIMIT is set (getenv reads
// the environment): whoever set them chose the collector's pace. Only the
// first call counts.
func Keep(getenv func(string) string, floor uint64) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return
	}
	once.Do(func() { forEachGC(adjuster(floor)) })
}

// adjuster returns the function run after each collection: it sets GOGC
// for the live heap the collection found.
func adjuster(floor uint64) func() {
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	last := 100
	return func() {
		metrics.Read(live)
		if live[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if p := percent(live[0].Value.Uint64(), floor); p != last {
			debug.SetGCPercent(p)
			last = p
		}
	}
}

// percent is the GOGC that puts the next collection at floor bytes for a
// live heap of live bytes, and 100 once that would be less.
func percent(live, floor uint64) int {
	if live == 0 || 2*live >= floor {
		return 100
	}
	return int(floor*100/live) - 100
}

// forEachGC calls fn after every collection: a finalizer that sets itself
// again each time it runs (as cmd/compile does).
func forEachGC(fn func()) {
	type sentinel [32]byte // not tiny-allocated: freed, and finalized, on its own
	var finalize func(*sentinel)
	finalize = func(p *sentinel) {
		fn()
		runtime.SetFinalizer(p, finalize)
	}
	runtime.SetFinalizer(new(sentinel), finalize)
}
