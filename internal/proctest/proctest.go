// Package proctest checks the process table for tests that must prove a
// process died (killed groups, cancelled calls, closed environments)
// without taking a sleep as proof.
package proctest

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Gone reports whether pid no longer runs: it is absent from the process
// table, or a zombie waiting for a parent that may never reap it (PID 1 in
// a container often does not).
func Gone(pid int) bool {
	if !hasProcfs() {
		// No procfs: zombies count as alive here, which is stricter.
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

// hasProcfs reports whether /proc is mounted; it is checked once, not on
// every poll of WaitGone.
var hasProcfs = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
})

// WaitGone polls until every pid is Gone and fails the test if one still
// runs after timeout.
func WaitGone(t testing.TB, timeout time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for !Gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive after %v", pid, timeout)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
