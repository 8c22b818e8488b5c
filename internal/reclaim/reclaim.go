// Package reclaim bounds and gives back the memory of large messages.
// The runtime's soft memory limit is the process's, so there is one
// Reclaimer per process: the command that serves makes it and hands it to
// every server it runs (mcpserver.Options.Reclaimer), instead of each
// Server setting the process-wide limit from its own state (issue 27).
package reclaim

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// New returns a process's Reclaimer.
func New() *Reclaimer { return new(Reclaimer) }

// Threshold is the message size after which memory is handed back
// to the OS promptly.
const Threshold = 1 << 20

// delay debounces reclaiming: one run after a burst of large
// messages.
const delay = 2 * time.Second

// Reclaimer bounds and gives back the memory of large messages. While
// one is handled, the runtime's soft memory limit holds the process to
// what it used before it arrived plus 3 bytes per byte of message and
// 8 MiB, a pacing target the heap passes when the GC falls behind on a
// busy machine (the bound promised is 4 bytes per byte and 32 MiB; with
// 16 MiB of slack a loaded `make test` measured 116 MiB against 114):
// decoding a message takes several
// copies of it (mcp-go reads the body again, keeps the raw arguments and
// decodes them), and the GC's default pacing would let the heap double on
// top. After the last one, memory is handed back to the OS: left to
// itself the scavenger keeps what a 12 MB call took (~120 MB of RSS here)
// for minutes, and a server often idles for hours, one per IDE window.
type Reclaimer struct {
	mu       sync.Mutex
	timer    *time.Timer
	inflight int64 // bytes of large messages being handled
	base     int64 // the runtime's memory when the first of them arrived
	limit    int64 // the limit in force before (GOMEMLIMIT); -1 unread
}

// Begin records a message of n bytes being handled; call the returned
// func when it is done.
func (rc *Reclaimer) Begin(n int) (end func()) {
	if rc == nil || n < Threshold {
		return func() {}
	}
	rc.mu.Lock()
	if rc.inflight == 0 {
		rc.base = runtimeMemory() - int64(n) // the message is already read
		rc.limit = debug.SetMemoryLimit(-1)
	}
	rc.inflight += int64(n)
	rc.setLimit()
	rc.mu.Unlock()
	return func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.inflight -= int64(n)
		if rc.inflight > 0 {
			rc.setLimit()
			return
		}
		debug.SetMemoryLimit(rc.limit)
		if rc.timer == nil {
			rc.timer = time.AfterFunc(delay, debug.FreeOSMemory)
			return
		}
		rc.timer.Reset(delay)
	}
}

// setLimit sets the memory limit for the messages in flight; rc.mu held.
func (rc *Reclaimer) setLimit() {
	debug.SetMemoryLimit(min(rc.limit, rc.base+3*rc.inflight+8<<20))
}

// runtimeMemory is what the runtime's memory limit counts: all memory it
// mapped, less what it returned to the OS.
func runtimeMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}
