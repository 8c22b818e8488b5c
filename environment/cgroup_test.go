package environment

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/testenv"
)

// TestCgroupHierarchies runs a tree with a setsid daemon in a cgroup of
// each writable hierarchy (cgroup2 through CLONE_INTO_CGROUP, v1 pids
// through the shell that moves itself in) and kills it by its cgroup.
func TestCgroupHierarchies(t *testing.T) {
	hs := findHierarchies()
	testenv.MustHave(t, slices.ContainsFunc(hs, func(h *cgroupHier) bool { return h.usable() }), "a writable cgroup hierarchy",
		"run as root, or in a container with a delegated cgroup v2 hierarchy")
	for _, h := range hs {
		name := "v1-pids"
		if h.v2 {
			name = "v2"
		}
		t.Run(name, func(t *testing.T) {
			if !h.usable() {
				t.Skipf("%s is not writable here", h.base)
			}
			e := newTestEnv(t, nil)
			lock := filepath.Join(e.Workspace(), "lock")
			l, err := e.prepare(t.Context(), Spec{Command: `setsid -f flock -x "$L" sleep 1000 </dev/null >/dev/null 2>&1; while [ ! -e "$L" ]; do sleep 0.01; done; echo up; exec sleep 1000`})
			if err != nil {
				t.Fatal(err)
			}
			l.env = append(os.Environ(), "L="+lock)
			cg, err := h.newCgroup(0)
			if err != nil {
				t.Fatal(err)
			}
			if !cg.wrap(&l) {
				t.Fatal("wrap refused a shell")
			}
			p, err := e.start(context.Background(), l)
			if err != nil {
				t.Fatal(err)
			}
			if line, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil || line != "up\n" {
				t.Fatalf("tree did not start: %q, %v", line, err)
			}
			if !cg.populated() {
				t.Fatal("the tree is not in its cgroup")
			}
			waitLocked(t, lock)
			if err := p.Signal(true); err != nil {
				t.Fatal(err)
			}
			waitTimeout(t, p)
			deadline := time.Now().Add(testTimeout)
			for flocked(t, lock) {
				if time.Now().After(deadline) {
					t.Fatal("the setsid daemon survived its cgroup's kill")
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

func waitLocked(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !flocked(t, path) {
		if time.Now().After(deadline) {
			t.Fatal("the daemon never took its lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func flocked(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
