package upstream_test

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/upstream"
)

// heapInUse is the memory the Go heap holds from the OS right now (mapped
// and not released: what RSS sees of it).
func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// peakDuring samples heapInUse every millisecond while f runs and returns
// the highest figure.
func peakDuring(f func()) uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if n := heapInUse(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	if n := heapInUse(); n > peak.Load() {
		peak.Store(n)
	}
	return peak.Load()
}

// A 40 MB result from an upstream goes back to the OS within seconds of
// the call, without anyone forcing a collection (the issue: kept 20 s),
// and costs at most 4× its size at its peak in-process, the builtin
// tools' figure: the stdio transport (stdioclient) gathers the line in
// chunks and joins them once, the result is a slice of that line, and
// the upstream module adds the text. mcp-go's own stdio transport made
// this 5×: five copies of the line before the result reached us.
func TestLargeResultMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 40 MB")
	}
	const size = 40 << 20
	const mib = 1 << 20
	h := newHost(t, fakeTable(t, "fake", ""), "")
	h.waitState(t, "fake", upstream.StateReady, nil)
	h.text(t, "fake.big", map[string]any{"bytes": 1 << 10}) // warm up: the first call's allocations are not the result's
	runtime.GC()
	time.Sleep(100 * time.Millisecond)
	base := heapInUse()
	var n int
	peak := peakDuring(func() {
		n = len(h.text(t, "fake.big", map[string]any{"bytes": size}))
	})
	if n != size {
		t.Fatalf("result of %d bytes; want %d", n, size)
	}
	t.Logf("peak: %.0f MiB over %.0f MiB before (%.1f× the result)", float64(peak-base)/mib, float64(base)/mib, float64(peak-base)/size)
	if peak-base > 4*size {
		t.Errorf("a %d MiB result took %.0f MiB at the peak; want at most 4×", size/mib, float64(peak-base)/mib)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		held := int64(heapInUse()) - int64(base)
		if held < 16*mib {
			t.Logf("given back: %.0f MiB held after the call", float64(held)/mib)
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%.0f MiB still held 5 s after the call; want it given back", float64(held)/mib)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("after a collection: %.0f MiB of live heap", float64(ms.HeapAlloc)/mib)
}
