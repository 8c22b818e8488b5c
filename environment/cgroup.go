package environment

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A process tree can leave its process group (setsid, a double-forked
// daemon) but not its cgroup: membership is inherited on fork and only a
// write to cgroup.procs changes it. So when a writable cgroup hierarchy is
// there, every spawned process gets a cgroup of its own, and killing the
// process kills the cgroup. This is what "no survivors" rests on for the
// local environment; the sandbox uses the same cgroups for its process
// limit (pids.max), because RLIMIT_NPROC does not bind uid 0.

// cgroupKillWait bounds how long a kill waits for a cgroup to empty.
const cgroupKillWait = 5 * time.Second

// cgroupHier is a cgroup hierarchy the server may create cgroups in.
type cgroupHier struct {
	v2   bool   // cgroup2 (cgroup.kill, CLONE_INTO_CGROUP) rather than v1
	base string // the server's own directory in it, created on first use
	pids bool   // cgroups made here have pids.max

	mkOnce sync.Once
	mkErr  error
	seq    atomic.Uint64
}

var (
	trackOnce sync.Once
	trackHier atomic.Pointer[cgroupHier] // nil when no hierarchy is writable
	pidsOnce  sync.Once
	pidsHier  atomic.Pointer[cgroupHier]
)

// trackingCgroups returns the hierarchy the local environment tracks
// process trees in, or nil: cgroup2 preferred (cgroup.kill is atomic),
// else the v1 pids hierarchy.
func trackingCgroups() *cgroupHier {
	trackOnce.Do(func() {
		for _, h := range findHierarchies() {
			if h.usable() {
				trackHier.Store(h)
				return
			}
		}
	})
	return trackHier.Load()
}

// pidsCgroups returns a hierarchy whose cgroups have pids.max, or nil.
func pidsCgroups() *cgroupHier {
	pidsOnce.Do(func() {
		for _, h := range findHierarchies() {
			if h.usable() && h.pids {
				pidsHier.Store(h)
				return
			}
		}
	})
	return pidsHier.Load()
}

// findHierarchies lists the cgroup2 hierarchy and the v1 pids one, as
// mounted for this process, each at the server's own cgroup, in that
// order.
func findHierarchies() []*cgroupHier {
	own := map[string]string{} // "" for v2, else a v1 controller → path
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			if parts[0] == "0" && parts[1] == "" {
				own[""] = parts[2]
				continue
			}
			for _, c := range strings.Split(parts[1], ",") {
				own[c] = parts[2]
			}
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var v2, v1 *cgroupHier
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+3 > len(fields) {
			continue
		}
		root, mnt, fstype, super := fields[3], unescapeMount(fields[4]), fields[sep+1], fields[sep+3]
		rel := func(path string) (string, bool) {
			if root == "/" {
				return path, true
			}
			if path == root || strings.HasPrefix(path, root+"/") {
				return strings.TrimPrefix(path, root), true
			}
			return "", false
		}
		switch {
		case fstype == "cgroup2" && v2 == nil:
			path, ok := own[""]
			if !ok {
				continue
			}
			if r, ok := rel(path); ok {
				dir := filepath.Join(mnt, r)
				ctl, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
				v2 = &cgroupHier{v2: true, base: filepath.Join(dir, "bub-mcp-"+strconv.Itoa(os.Getpid())),
					pids: bytes.Contains(ctl, []byte("pids"))}
			}
		case fstype == "cgroup" && v1 == nil && hasOpt(super, "pids"):
			path, ok := own["pids"]
			if !ok {
				continue
			}
			if r, ok := rel(path); ok {
				v1 = &cgroupHier{base: filepath.Join(mnt, r, "bub-mcp-"+strconv.Itoa(os.Getpid())), pids: true}
			}
		}
	}
	var out []*cgroupHier
	for _, h := range []*cgroupHier{v2, v1} {
		if h != nil {
			out = append(out, h)
		}
	}
	return out
}

func hasOpt(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// usable creates the server's directory once and reports whether that
// worked (the hierarchy is writable to us).
func (h *cgroupHier) usable() bool {
	h.mkOnce.Do(func() {
		sweepStale(filepath.Dir(h.base))
		if err := os.Mkdir(h.base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			h.mkErr = err
			return
		}
		// Creating is not enough: moving a process in must work too,
		// which a read-only or undelegated hierarchy refuses.
		probe, err := h.newCgroup(0)
		if err != nil {
			h.mkErr = err
			return
		}
		probe.remove()
	})
	return h.mkErr == nil
}

// cgroup is one process tree's cgroup.
type cgroup struct {
	h   *cgroupHier
	dir string

	mu sync.Mutex
	fd int // an O_PATH descriptor of dir, for CLONE_INTO_CGROUP (v2); -1 otherwise
}

// newCgroup makes a fresh cgroup, with pids.max set when maxPids > 0.
func (h *cgroupHier) newCgroup(maxPids int) (*cgroup, error) {
	dir := filepath.Join(h.base, "p"+strconv.FormatUint(h.seq.Add(1), 10))
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrNotExist) {
		// An environment's Close removed the server's directory.
		if err = os.Mkdir(h.base, 0o755); err == nil || errors.Is(err, os.ErrExist) {
			err = os.Mkdir(dir, 0o755)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("environment: cgroup: %w", err)
	}
	cg := &cgroup{h: h, dir: dir, fd: -1}
	if maxPids > 0 {
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(maxPids)), 0); err != nil {
			cg.remove()
			return nil, fmt.Errorf("environment: cgroup pids.max: %w", err)
		}
	}
	if h.v2 {
		fd, err := syscall.Open(dir, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			cg.remove()
			return nil, fmt.Errorf("environment: cgroup: %w", err)
		}
		cg.fd = fd
	}
	return cg, nil
}

// wrap makes l start inside cg and reports whether it could. On cgroup2
// the kernel puts the child there at clone time (see start); v1 has no
// such thing, so a shell moves itself in and then execs the command,
// before the command can fork. The command is looked up first, so that a
// missing one still fails Spawn instead of becoming the shell's exit 127.
func (cg *cgroup) wrap(l *launch) bool {
	if cg.fd < 0 {
		name := l.name
		if !strings.Contains(name, "/") {
			p, err := exec.LookPath(name)
			if err != nil {
				return false
			}
			name = p
		}
		procs := filepath.Join(cg.dir, "cgroup.procs")
		l.args = append([]string{"-c", `echo 0 > "$0" && exec "$@"`, procs, name}, l.args...)
		l.name = "/bin/sh"
	} else {
		l.cgroupFD = cg.fd
	}
	l.kill = cg.kill
	l.alive = cg.populated
	l.cleanup = cg.remove
	return true
}

// populated reports whether any process is left in the cgroup.
func (cg *cgroup) populated() bool {
	b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	return err == nil && len(bytes.TrimSpace(b)) > 0
}

// kill SIGKILLs every process in the cgroup and waits (bounded) until it
// is empty. cgroup2's cgroup.kill does it in one step; on v1 forks are
// stopped first (pids.max = 0) so that the loop converges.
func (cg *cgroup) kill() {
	if cg.h.v2 {
		if err := os.WriteFile(filepath.Join(cg.dir, "cgroup.kill"), []byte("1"), 0); err == nil {
			cg.waitEmpty()
			return
		}
	} else {
		_ = os.WriteFile(filepath.Join(cg.dir, "pids.max"), []byte("0"), 0)
	}
	deadline := time.Now().Add(cgroupKillWait)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
		if err != nil {
			return
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			return
		}
		for _, s := range pids {
			if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killNoWait is kill without waiting: one cgroup.kill on cgroup2, one
// round of SIGKILL to the members on v1.
func (cg *cgroup) killNoWait() {
	if cg.h.v2 {
		if err := os.WriteFile(filepath.Join(cg.dir, "cgroup.kill"), []byte("1"), 0); err == nil {
			return
		}
	}
	b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, s := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (cg *cgroup) waitEmpty() {
	deadline := time.Now().Add(cgroupKillWait)
	for cg.populated() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// remove deletes the cgroup if it is empty; a cgroup still holding
// processes stays until the next remove (Close kills first).
func (cg *cgroup) remove() {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.fd >= 0 {
		syscall.Close(cg.fd)
		cg.fd = -1
	}
	_ = syscall.Rmdir(cg.dir)
}

// oPath is Linux's O_PATH, which package syscall does not name.
const oPath = 0x200000

// sweepStale removes the empty cgroup directories of bub-mcp servers that
// have exited (a server cannot remove its own at exit: its last
// processes may still be leaving them).
func sweepStale(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, ent := range ents {
		pid, ok := strings.CutPrefix(ent.Name(), "bub-mcp-")
		if !ok || !ent.IsDir() {
			continue
		}
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue
		}
		dir := filepath.Join(parent, ent.Name())
		if subs, err := os.ReadDir(dir); err == nil {
			for _, sub := range subs {
				if sub.IsDir() {
					_ = syscall.Rmdir(filepath.Join(dir, sub.Name()))
				}
			}
		}
		_ = syscall.Rmdir(dir)
	}
}

// removeBase removes the server's directory of each hierarchy in use if it
// is empty, so that a server leaves nothing behind once its environments
// are closed; a later cgroup recreates it.
func removeBase() {
	for _, h := range []*cgroupHier{trackHier.Load(), pidsHier.Load()} {
		if h != nil {
			_ = syscall.Rmdir(h.base)
		}
	}
}
