package environment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ForkServerHost is implemented by environments that can host a fork
// server: one long-lived process that forks a fresh child per run, as code
// mode's runner does so that concurrent runs all start warm. It is
// optional; code mode starts a process per run where it is missing.
type ForkServerHost interface {
	// StartForkServer starts spec like Spawn, with files as descriptors
	// 3, 4, ... of the process, and returns what each forked child must
	// get before it runs anything. The server lives until ctx ends, it is
	// signalled, or the environment closes.
	StartForkServer(ctx context.Context, spec Spec, files []*os.File) (Process, *ForkPolicy, error)
}

// ForkPolicy is what an environment requires of every child its fork
// server forks, so that a forked run is held as tightly as a spawned one.
type ForkPolicy struct {
	// Unshare names the namespaces each child makes for itself before it
	// runs anything: "pid", "mount" (with a /proc of its own), "ipc",
	// "uts", "net" (with only loopback). Empty for the local environment.
	Unshare []string
	// Adopt is called with the pid (in the caller's pid namespace) of a
	// forked child's first process, before it runs anything or forks:
	// it puts the child where Kill reaches its whole tree (its own
	// cgroup, where the environment gives spawned processes one) and
	// where the environment's Close finds it.
	Adopt func(pid int) (*ForkedTree, error)
}

// ForkedTree is the process tree of one forked child. Its methods are
// safe for concurrent use.
type ForkedTree struct {
	pid    int
	group  bool // the head leads its own process group (local)
	forget func()

	mu        sync.Mutex
	groupGone bool
	pidfd     int // -1 once closed
	cg        *cgroup
	released  bool
}

// Pid is the head's pid in the server's pid namespace.
func (t *ForkedTree) Pid() int { return t.pid }

// Signal sends sig to the head (through a pidfd, so a reused pid is never
// hit) and, for SIGKILL, to everything in the tree: its cgroup, its
// process group, or (sandbox) its pid namespace, which dies with the
// head. Signalling a tree that is gone is not an error.
func (t *ForkedTree) Signal(sig syscall.Signal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released {
		return
	}
	if sig == syscall.SIGKILL && t.cg != nil {
		// Without waiting for it to empty (Release does): the caller
		// waits for the head, and the rest goes at once.
		t.cg.killNoWait()
	}
	if t.pidfd >= 0 {
		_ = unix.PidfdSendSignal(t.pidfd, sig, nil, 0)
	}
	if t.group && !t.groupGone {
		// While the group has a member its id cannot be reused; once it
		// is seen empty it is never signalled again (as for a spawned
		// process).
		if err := syscall.Kill(-t.pid, sig); err == syscall.ESRCH {
			t.groupGone = true
		}
	}
}

// Release kills what is left of the tree and frees what holds it: the
// pidfd and the cgroup. Call it once the head has exited; later calls do
// nothing.
func (t *ForkedTree) Release() {
	t.Signal(syscall.SIGKILL)
	t.mu.Lock()
	if !t.released && t.cg != nil {
		t.cg.kill()
	}
	defer t.mu.Unlock()
	if t.released {
		return
	}
	t.released = true
	if t.pidfd >= 0 {
		_ = syscall.Close(t.pidfd)
		t.pidfd = -1
	}
	if t.cg != nil {
		t.cg.remove()
	}
	if t.forget != nil {
		t.forget()
	}
}

// adoptTree opens a pidfd for pid and, when maxPids >= 0 and h is not nil,
// moves pid into a fresh cgroup of h (pids.max set when maxPids > 0). A
// cgroup is required when required is set.
func adoptTree(pid int, group bool, h *cgroupHier, maxPids int, required bool) (*ForkedTree, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("environment: forked child %d: pidfd_open: %w", pid, err)
	}
	t := &ForkedTree{pid: pid, group: group, pidfd: fd}
	if h != nil {
		cg, err := h.newCgroup(maxPids)
		if err == nil {
			err = os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
			if err != nil {
				cg.remove()
				err = fmt.Errorf("environment: forked child %d: enter its cgroup: %w", pid, err)
			} else {
				t.cg = cg
			}
		}
		if err != nil && required {
			_ = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
			_ = syscall.Close(fd)
			return nil, err
		}
	}
	return t, nil
}

// track registers t so that Close kills it, and sets t.forget.
func (e *LocalEnvironment) track(t *ForkedTree) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		t.Release()
		return ErrClosed
	}
	if e.trees == nil {
		e.trees = map[*ForkedTree]struct{}{}
	}
	e.trees[t] = struct{}{}
	t.forget = func() {
		e.mu.Lock()
		delete(e.trees, t)
		e.mu.Unlock()
	}
	return nil
}

// StartForkServer starts spec as Spawn does, with files as descriptors
// 3, 4, .... Each forked child leads a new session and process group and,
// where processes get a cgroup of their own (TracksTrees), a cgroup of its
// own too: the same hold as a spawned process.
func (e *LocalEnvironment) StartForkServer(ctx context.Context, spec Spec, files []*os.File) (Process, *ForkPolicy, error) {
	p, err := e.spawn(ctx, spec, files)
	if err != nil {
		return nil, nil, err
	}
	pol := &ForkPolicy{Adopt: func(pid int) (*ForkedTree, error) {
		t, err := adoptTree(pid, true, trackingCgroups(), 0, false)
		if err != nil {
			return nil, err
		}
		if err := e.track(t); err != nil {
			return nil, err
		}
		return t, nil
	}}
	return p, pol, nil
}

// errForkProcesses is StartForkServer's error when the processes limit
// could only be per-uid (RLIMIT_NPROC), which forked children would share.
var errForkProcesses = errors.New("environment: sandbox fork server: the processes limit needs the pids cgroup controller (root) to hold per run; without it each run is spawned")

// StartForkServer starts spec in a sandbox of its own that keeps
// CAP_SYS_ADMIN, CAP_SETPCAP and (without network) CAP_NET_ADMIN in its
// user namespace, with files as descriptors 3, 4, .... The policy has
// each forked child make its own pid, mount, ipc, uts and (network
// "none") net namespaces, mount a /proc of its own, and drop every
// capability before it runs anything, so that it is held as a spawned
// process is: nothing it starts outlives it, it sees no other run's
// processes, and it holds no capability. What it shares with other runs
// of the environment is what spawned processes share: the workspace and
// /tmp. With a processes limit the child gets a pids cgroup of its own;
// that needs root (see SandboxPolicy.Processes), else it fails.
func (s *SandboxEnvironment) StartForkServer(ctx context.Context, spec Spec, files []*os.File) (Process, *ForkPolicy, error) {
	if s.policy.Processes > 0 && s.pidsCg == nil {
		return nil, nil, errForkProcesses
	}
	caps := []string{"--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"}
	unshare := []string{"pid", "mount", "ipc", "uts"}
	if s.policy.Network == NetworkNone {
		caps = append(caps, "--cap-add", "CAP_NET_ADMIN")
		unshare = append(unshare, "net")
	}
	p, err := s.spawn(ctx, spec, files, caps)
	if err != nil {
		return nil, nil, err
	}
	pol := &ForkPolicy{Unshare: unshare, Adopt: func(pid int) (*ForkedTree, error) {
		var h *cgroupHier
		maxPids := 0
		if s.pidsCg != nil {
			// The interpreter and what it starts, its threads included;
			// bubblewrap's pid 1 is the one more a spawned tree gets (the
			// child's pid 1 stays outside the cgroup).
			h, maxPids = s.pidsCg, s.policy.Processes+1
		}
		t, err := adoptTree(pid, false, h, maxPids, h != nil)
		if err != nil {
			return nil, err
		}
		if err := s.host.track(t); err != nil {
			return nil, err
		}
		return t, nil
	}}
	return p, pol, nil
}

var (
	_ ForkServerHost = (*LocalEnvironment)(nil)
	_ ForkServerHost = (*SandboxEnvironment)(nil)
)
