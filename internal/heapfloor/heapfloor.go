// Package heapfloor keeps Go's garbage collector from running while the
// heap is small.
//
// With GOGC=100 the collector runs whenever the heap has doubled since the
// last collection, and at least every 4 MiB. A server whose live heap is
// 1-2 MiB and whose calls allocate ~13 KB each then collects every ~150
// calls; with 32 calls in flight that was a fifth of bub-mcp's CPU per call
// (internal/bench's BenchmarkEchoPaired). After each collection Keep sets
// GOGC so that the next one comes at about the floor, and leaves it at 100
// where that would come later anyway: a large message is collected as it
// would be without Keep. The technique is cmd/compile's
// AdjustStartingHeap (golang/go#56546), kept for the life of the process.
package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Default is the floor bub-mcp serve keeps: the heap may grow to 16 MiB
// between collections, up to ~12 MiB more resident memory under load for
// the CPU above.
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
// for the heap the collection found.
func adjuster(floor uint64) func() {
	sample := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}
	last := 100
	return func() {
		metrics.Read(sample)
		var v [3]uint64
		for i, s := range sample {
			if s.Value.Kind() != metrics.KindUint64 {
				return // a runtime without these metrics: leave GOGC be
			}
			v[i] = s.Value.Uint64()
		}
		if p := percent(v[0], v[0]+v[1]+v[2], floor); p != last {
			debug.SetGCPercent(p)
			last = p
		}
	}
}

// percent is the GOGC that puts the next collection at floor bytes of
// heap, and 100 where that would be less. The runtime's goal is the larger
// of live + roots×GOGC/100 (roots: the live heap, stacks and globals) and
// its minimum heap, 4 MiB×GOGC/100 (runtime/mgcpacer.go, heapMinimum):
// the smaller GOGC that brings either to the floor does.
func percent(live, roots, floor uint64) int {
	if roots == 0 || live >= floor {
		return 100
	}
	const minimumHeap = 4 << 20 // at GOGC=100
	p := min((floor-live)*100/roots, floor*100/minimumHeap)
	return max(100, int(p))
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
