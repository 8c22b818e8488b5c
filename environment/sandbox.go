package environment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SandboxName is the name the bubblewrap environment is registered
// under: a profile picks it with environment = "sandbox".
const SandboxName = "sandbox"

// DefaultBwrap is the bubblewrap binary looked up in PATH when
// SandboxPolicy.Bwrap is empty (Debian package bubblewrap).
const DefaultBwrap = "bwrap"

// Network modes of SandboxPolicy.Network.
const (
	// NetworkNone gives the sandbox a network namespace of its own with
	// only a loopback interface: nothing reaches the host's sockets, not
	// even 127.0.0.1 of the host.
	NetworkNone = "none"
	// NetworkHost shares the host's network.
	NetworkHost = "host"
)

// SandboxPolicy is what a profile may set about its sandbox
// ([profiles.<name>.sandbox] and [sandbox] bwrap in bub.toml). The zero
// value is the strictest: no network, no extra paths, no limits beyond the
// namespaces.
type SandboxPolicy struct {
	// Bwrap is the bubblewrap binary; empty means DefaultBwrap in PATH.
	Bwrap string
	// Network is NetworkNone (also for "") or NetworkHost.
	Network string
	// ReadOnly and ReadWrite are extra host paths made visible at the same
	// place, read-only or writable. They must exist.
	ReadOnly, ReadWrite []string
	// Memory is each process's address-space limit in bytes
	// (RLIMIT_AS); 0 means none.
	Memory int64
	// CPUSeconds is each process's CPU-time limit (RLIMIT_CPU); 0 means
	// none.
	CPUSeconds int64
	// Processes bounds the processes of one spawned tree: pids.max of its
	// cgroup when the server runs as root (RLIMIT_NPROC does not bind uid
	// 0), else RLIMIT_NPROC in the sandbox's user namespace; either counts
	// threads too. 0 means none.
	Processes int
	// FileSize is the largest file a process may write, in bytes
	// (RLIMIT_FSIZE); 0 means none.
	FileSize int64
}

// SandboxOptions configures a SandboxEnvironment; the zero value of each
// field means what the LocalOptions field of the same name means.
type SandboxOptions struct {
	// Workspace is the directory mounted read-write at the same path;
	// empty means the current directory.
	Workspace string
	// AllowPaths are extra roots mounted read-only, such as code mode's
	// stub directory.
	AllowPaths []string
	// Hidden are roots no process or file operation of the sandbox may
	// reach, such as the server's home ($BUB_HOME) inside a workspace of
	// "~". Each that lies inside a mounted path (the workspace, ReadWrite,
	// ReadOnly) is covered by an empty read-only tmpfs, made as a
	// directory on the host first if missing, and the directories
	// between it and that path are mount points too, so that no process
	// can rename them; an AllowPath beneath one is mounted read-only on
	// top of it, so it stays readable. File operations refuse paths
	// beneath them with ErrOutsideWorkspace.
	Hidden []string
	// Python is the interpreter code runs with; empty means "python3". It
	// is resolved on the host to its real executable, and its
	// installation is mounted read-only, so a Python under $HOME (pyenv)
	// works although $HOME is not visible.
	Python string
	// ExtraEnv holds KEY=VALUE entries added to every process's
	// environment, before Spec.Env.
	ExtraEnv []string
	// MaxReadBytes caps ReadText as in LocalOptions.
	MaxReadBytes int64
	// WaitDelay is as in LocalOptions.
	WaitDelay time.Duration
	// Policy is the profile's sandbox policy.
	Policy SandboxPolicy
	// PythonCache keeps where Python lives across the sandboxes of one
	// owner; nil means asking the interpreter for each new sandbox.
	PythonCache *PythonCache
}

// SandboxEnvironment runs every process in a bubblewrap sandbox of its
// own: new user, pid, ipc, uts, cgroup and (unless Network is "host")
// network namespaces; no capabilities; /usr, /bin, /lib* and a few files
// of /etc (copied once, see sandboxEtc) read-only; the workspace and
// ReadWrite paths writable; a /tmp private to the environment (shared by
// its processes, not with the host); everything else not mounted
// invisible, and so are the Hidden roots inside mounted paths: with
// $BUB_HOME hidden (the application hides it for every profile), a
// workspace of "~" does not expose bub.toml or the audit log.
// Each process is pid 1's child in its pid namespace, so when it exits,
// is signalled or its ctx ends, everything it started dies with it,
// setsid daemons included (--die-with-parent covers the server's own
// death). Only a minimal environment (PATH, locale, TERM, TZ) is passed
// in; HOME and TMPDIR are /tmp.
//
// File operations run on the host but are confined to what the sandbox
// can see, resolved beneath each mounted root with os.Root, so a symlink
// planted by a sandboxed process cannot point them outside; a file opened
// is checked once more where the kernel says it is, so such a symlink
// cannot point them into a hidden root either. A process racing a write
// can at most make an empty directory appear there, never a file.
//
// What it does not do: no seccomp filter (the kernel's whole syscall
// surface is reachable from the namespaces), no disk quota beyond
// FileSize per file, and with Network "host" the host's network is fully
// reachable.
type SandboxEnvironment struct {
	host      *LocalEnvironment // process tracking, Close, workspace
	bwrap     string
	policy    SandboxPolicy
	dir       string // host directory holding tmp and etc, removed by Close
	tmp       string // host directory mounted at /tmp
	python    string // real interpreter path
	maxRead   int64
	baseArgs  []string
	readRoots []string // absolute inside paths, longest first
	hidden    hiddenSet
	writeable map[string]bool
	pidsCg    *cgroupHier // set when Processes needs pids.max
	rlimits   []string    // prlimit arguments, empty for none
	env       []string    // the base environment inside
}

// sandboxEtc are the /etc entries visible (read-only): name resolution,
// users and groups (not their passwords), the dynamic linker, TLS roots,
// time zone and Debian's alternatives (/usr/bin links point into it).
var sandboxEtc = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf",
	"group", "host.conf", "hostname", "hosts", "inputrc", "ld.so.cache",
	"ld.so.conf", "ld.so.conf.d", "localtime", "mime.types", "nsswitch.conf",
	"os-release", "passwd", "profile", "protocols", "resolv.conf", "services",
	"ssl", "timezone",
}

// sandboxSystem are the system directories mounted read-only (or
// recreated as the symlinks they are on merged-/usr systems).
var sandboxSystem = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// sandboxEnvKeys are the host variables passed into the sandbox.
var sandboxEnvKeys = []string{"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ"}

// NewSandbox checks that bubblewrap can start and returns a sandbox
// environment. A nil opts means defaults.
func NewSandbox(opts *SandboxOptions) (*SandboxEnvironment, error) {
	var o SandboxOptions
	if opts != nil {
		o = *opts
	}
	pol := o.Policy
	bw := pol.Bwrap
	if bw == "" {
		bw = DefaultBwrap
	}
	bwPath, err := exec.LookPath(bw)
	if err != nil {
		return nil, fmt.Errorf("environment: sandbox needs bubblewrap: %q not found (install the bubblewrap package, e.g. apt-get install -y bubblewrap, or set [sandbox] bwrap): %w", bw, err)
	}
	switch pol.Network {
	case "", NetworkNone:
		pol.Network = NetworkNone
	case NetworkHost:
	default:
		return nil, fmt.Errorf("environment: sandbox network %q: want %q or %q", pol.Network, NetworkNone, NetworkHost)
	}
	if pol.Memory < 0 || pol.CPUSeconds < 0 || pol.Processes < 0 || pol.FileSize < 0 {
		return nil, errors.New("environment: sandbox limits must be >= 0")
	}
	host, err := NewLocal(&LocalOptions{Workspace: o.Workspace, Python: o.Python, ExtraEnv: o.ExtraEnv,
		MaxReadBytes: o.MaxReadBytes, WaitDelay: o.WaitDelay})
	if err != nil {
		return nil, err
	}
	s := &SandboxEnvironment{host: host, bwrap: bwPath, policy: pol, maxRead: host.maxRead, writeable: map[string]bool{}}
	fail := func(err error) (*SandboxEnvironment, error) {
		_ = s.Close()
		return nil, err
	}
	if pol.Processes > 0 && os.Geteuid() == 0 {
		if s.pidsCg = pidsCgroups(); s.pidsCg == nil {
			return fail(errors.New("environment: sandbox processes limit: running as root, where RLIMIT_NPROC does not apply, it needs a writable cgroup hierarchy with the pids controller (none found)"))
		}
	}
	s.dir, err = os.MkdirTemp("", "bub-sandbox-")
	if err != nil {
		return fail(fmt.Errorf("environment: sandbox directory: %w", err))
	}
	s.tmp = filepath.Join(s.dir, "tmp")
	etc := filepath.Join(s.dir, "etc")
	for _, d := range []string{s.tmp, etc} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fail(fmt.Errorf("environment: sandbox directory: %w", err))
		}
	}
	// The chosen /etc entries are copied once into a directory mounted
	// whole, rather than mounted one by one: each mount costs every spawn
	// time (a third of a sandbox's start-up with two dozen of them).
	if err := copyEtc(etc); err != nil {
		return fail(err)
	}
	if err := os.Chmod(etc, 0o755); err != nil {
		return fail(fmt.Errorf("environment: sandbox /etc: %w", err))
	}
	python, prefixes, err := o.PythonCache.resolve(host.python)
	if err != nil {
		// Without Python only run_code fails, with this error.
		python = host.python
	}
	s.python = python

	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "bub-sandbox",
	}
	if pol.Network == NetworkNone {
		a = append(a, "--unshare-net")
	}
	for _, d := range sandboxSystem {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	a = append(a, "--ro-bind", etc, "/etc", "--proc", "/proc", "--dev", "/dev", "--bind", s.tmp, "/tmp")
	for _, p := range prefixes {
		a = append(a, "--ro-bind", p, p)
	}
	// Roots the file tools may use, with /tmp mapped to s.tmp.
	addRoot := func(inside string, write bool) {
		s.readRoots = append(s.readRoots, inside)
		if write {
			s.writeable[inside] = true
		}
	}
	addRoot("/tmp", true)
	// The binds below are mounted outermost first (see after the
	// workspace), so a read-only path inside a writable one (code mode's
	// stub directory inside a workspace of ~) stays read-only, and a
	// hidden root's tmpfs covers what is beneath it but not what is
	// mounted inside it afterwards.
	var binds []bind
	mount := func(p, flag string, write bool) error {
		p, err := hostPath(p, host.workspace)
		if err != nil {
			return err
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("environment: sandbox path %q: %w", p, err)
		}
		binds = append(binds, bind{flag, real})
		addRoot(real, write)
		return nil
	}
	for _, p := range o.AllowPaths {
		// Code mode's stub directory may not exist yet (stubs are
		// written when a View is handed out). It is made now, so that
		// it is mounted read-only from the first spawn on: inside a
		// workspace that holds it, a process could otherwise make it
		// first and plant files there. Where it cannot be made, it is
		// mounted once it exists (--ro-bind-try).
		p, err := hostPath(p, host.workspace)
		if err != nil {
			return fail(err)
		}
		_ = os.MkdirAll(p, 0o700)
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		binds = append(binds, bind{"--ro-bind-try", p})
		addRoot(p, false)
	}
	for _, p := range pol.ReadOnly {
		if err := mount(p, "--ro-bind", false); err != nil {
			return fail(fmt.Errorf("%w (read_only)", err))
		}
	}
	for _, p := range pol.ReadWrite {
		if err := mount(p, "--bind", true); err != nil {
			return fail(fmt.Errorf("%w (read_write)", err))
		}
	}
	if err := mount(host.workspace, "--bind", true); err != nil {
		return fail(err)
	}
	wsReal := s.readRoots[len(s.readRoots)-1]
	open := make([]string, len(s.readRoots))
	for i, r := range s.readRoots {
		open[i] = r
		if r == "/tmp" {
			open[i] = s.tmp
		}
	}
	if s.hidden, err = newHiddenSet(o.Hidden, host.workspace, open); err != nil {
		return fail(err)
	}
	var covered []string
	for _, h := range s.hidden.roots {
		if !slices.ContainsFunc(binds, func(b bind) bool { return beneath(h, b.path) }) {
			continue // not mounted: invisible already
		}
		// The tmpfs needs a directory to cover; one made now also
		// keeps a process from making it first and filling it.
		if err := os.MkdirAll(h, 0o700); err != nil {
			return fail(fmt.Errorf("environment: sandbox hidden path %s: %w", h, err))
		}
		if fi, err := os.Stat(h); err != nil || !fi.IsDir() {
			return fail(fmt.Errorf("environment: sandbox hidden path %s is not a directory", h))
		}
		binds = append(binds, pinAncestors(binds, h)...)
		binds = append(binds, bind{"--tmpfs", h})
		covered = append(covered, h)
	}
	// bubblewrap mounts in argument order and a later mount hides what
	// an earlier one put beneath it: mount parents before their children
	// (a parent's path is shorter), so each path gets the mode of its
	// innermost root, as the file tools' locate gives it. The sort is
	// stable: for one path listed twice, the later (writable) one wins,
	// and a hidden root's tmpfs, last, wins over a mount of its own path.
	slices.SortStableFunc(binds, func(x, y bind) int { return len(x.path) - len(y.path) })
	for _, b := range binds {
		if b.flag == "--tmpfs" {
			a = append(a, b.flag, b.path)
			continue
		}
		a = append(a, b.flag, b.path, b.path)
	}
	// The workspace is mounted at its real path; the configured one may
	// go through a symlink, so make that visible too.
	if wsReal != host.workspace {
		a = append(a, "--symlink", wsReal, host.workspace)
	}
	// Read-only only now: the mounts inside a tmpfs needed their mount
	// points made in it.
	for _, h := range covered {
		a = append(a, "--remount-ro", h)
	}
	a = append(a, "--remount-ro", "/")
	s.baseArgs = a
	// Longest roots first, so a path is matched to its innermost mount.
	sortLongestFirst(s.readRoots)

	if pol.Memory > 0 {
		s.rlimits = append(s.rlimits, "--as="+strconv.FormatInt(pol.Memory, 10))
	}
	if pol.CPUSeconds > 0 {
		s.rlimits = append(s.rlimits, "--cpu="+strconv.FormatInt(pol.CPUSeconds, 10))
	}
	if pol.FileSize > 0 {
		s.rlimits = append(s.rlimits, "--fsize="+strconv.FormatInt(pol.FileSize, 10))
	}
	if pol.Processes > 0 && s.pidsCg == nil {
		s.rlimits = append(s.rlimits, "--nproc="+strconv.Itoa(pol.Processes))
	}
	if len(s.rlimits) > 0 {
		if _, err := exec.LookPath("prlimit"); err != nil {
			return fail(fmt.Errorf("environment: sandbox limits need prlimit (util-linux): %w", err))
		}
	}

	for _, k := range sandboxEnvKeys {
		if v, ok := os.LookupEnv(k); ok {
			s.env = append(s.env, k+"="+v)
		}
	}
	s.env = append(s.env, "HOME=/tmp", "TMPDIR=/tmp")
	s.env = append(s.env, host.extraEnv...)

	// Fail now, with bubblewrap's own words, rather than at the first
	// tool call: a kernel without unprivileged user namespaces, a
	// seccomp profile refusing them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := s.Spawn(ctx, Spec{Argv: []string{"true"}})
	if err != nil {
		return fail(err)
	}
	errOut, _ := readAllLimit(p.Stderr(), 4096)
	if code, err := p.Wait(); code != 0 || err != nil {
		return fail(fmt.Errorf("environment: sandbox: %s cannot start a sandbox here (exit %d, %v): %s", bwPath, code, err, strings.TrimSpace(errOut)))
	}
	return s, nil
}

// bind is one bubblewrap mount of a host path at the same place: flag
// is --bind, --ro-bind, --ro-bind-try or --tmpfs (which takes no source).
type bind struct{ flag, path string }

// pinAncestors returns binds of each directory between the hidden root h
// and the innermost of binds holding it onto itself, with that one's
// mode. A mount point cannot be renamed, so a process cannot move the
// directory holding $BUB_HOME away from the path the server uses (its
// contents would stay covered, but the server would lose them).
func pinAncestors(binds []bind, h string) []bind {
	var in *bind
	for i, b := range binds {
		if b.flag != "--tmpfs" && b.path != h && beneath(h, b.path) && (in == nil || len(b.path) > len(in.path)) {
			in = &binds[i]
		}
	}
	if in == nil {
		return nil
	}
	flag := in.flag
	if flag == "--ro-bind-try" {
		flag = "--ro-bind"
	}
	var pins []bind
	for d := filepath.Dir(h); d != in.path && beneath(d, in.path); d = filepath.Dir(d) {
		if !slices.ContainsFunc(binds, func(b bind) bool { return b.path == d && b.flag != "--tmpfs" }) {
			pins = append(pins, bind{flag, d})
		}
	}
	return pins
}

// sortLongestFirst orders paths by decreasing length.
func sortLongestFirst(p []string) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && len(p[j]) > len(p[j-1]); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

// Workspace is the absolute workspace directory, the same inside the
// sandbox and on the host.
func (s *SandboxEnvironment) Workspace() string { return s.host.workspace }

// Python is the real interpreter executable, visible inside.
func (s *SandboxEnvironment) Python() string { return s.python }

// Closed returns a channel closed when Close begins (ClosedNotifier).
func (s *SandboxEnvironment) Closed() <-chan struct{} { return s.host.closedCh }

// Spawn starts spec in a sandbox of its own. See Environment.Spawn.
func (s *SandboxEnvironment) Spawn(ctx context.Context, spec Spec) (Process, error) {
	return s.spawn(ctx, spec, nil, nil)
}

// spawn is Spawn with files as descriptors 3, 4, ... of the process and
// extra bubblewrap arguments (capabilities) after the base ones.
func (s *SandboxEnvironment) spawn(ctx context.Context, spec Spec, files []*os.File, extra []string) (Process, error) {
	dirArg := spec.Dir
	spec.Dir = ""
	l, err := s.host.prepare(ctx, spec)
	if err != nil {
		return nil, err
	}
	dir := s.host.workspace
	if dirArg != "" {
		inside, hostRoot, rel, err := s.locate(dirArg)
		if err != nil {
			return nil, err
		}
		// Fail here, as the local environment does, rather than with
		// bwrap's chdir error as the process's output.
		fi, err := os.Stat(filepath.Join(hostRoot, rel))
		if err != nil {
			return nil, fmt.Errorf("environment: start in %s: %w", inside, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("environment: start in %s: not a directory", inside)
		}
		dir = inside
	}
	args := make([]string, 0, len(s.baseArgs)+len(extra)+8+len(l.args))
	args = append(args, s.baseArgs...)
	args = append(args, extra...)
	args = append(args, "--chdir", dir, "--")
	if len(s.rlimits) > 0 {
		args = append(args, "prlimit")
		args = append(args, s.rlimits...)
		args = append(args, "--")
	}
	args = append(args, l.name)
	args = append(args, l.args...)
	l.name, l.args, l.dir = s.bwrap, args, s.host.workspace
	l.env = append(append(append([]string(nil), s.env...), spec.Env...), "PWD="+dir)
	l.keepStdin = spec.KeepStdin
	l.files = files
	if s.pidsCg != nil {
		// One more than asked: bubblewrap's own pid 1 counts too.
		cg, err := s.pidsCg.newCgroup(s.policy.Processes + 2)
		if err != nil {
			return nil, err
		}
		// The limit must hold: unlike tracking, no fallback without it.
		if !cg.wrap(&l) {
			cg.remove()
			return nil, fmt.Errorf("environment: sandbox: cannot start %s in its cgroup", s.bwrap)
		}
	}
	return s.host.start(ctx, l)
}

// Close ends every sandbox the environment started and removes its /tmp
// and /etc.
func (s *SandboxEnvironment) Close() error {
	err := s.host.Close()
	if s.dir != "" {
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("environment: remove sandbox directory: %w", rerr))
		}
	}
	return err
}

// maxEtcBytes bounds the copy of /etc entries; Debian's come to about a
// megabyte (mostly TLS roots).
const maxEtcBytes = 64 << 20

// copyEtc copies the sandboxEtc entries of /etc that exist into dst:
// directories, regular files and symlinks (kept as links, most point into
// /usr); anything else is skipped.
func copyEtc(dst string) error {
	budget := int64(maxEtcBytes)
	var copyOne func(src, dst string, depth int) error
	copyOne = func(src, dst string, depth int) error {
		fi, err := os.Lstat(src)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			// A link into /usr works inside; one elsewhere (resolv.conf
			// to /run) would dangle, so its target is copied instead.
			if real, err := filepath.EvalSymlinks(src); err == nil && underSystem(real) {
				return os.Symlink(target, dst)
			}
			if fi, err = os.Stat(src); err != nil {
				return nil
			}
		}
		switch {
		case fi.IsDir():
			if depth > 8 {
				return nil
			}
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
			ents, err := os.ReadDir(src)
			if err != nil {
				return nil // unreadable: left empty, as the kernel would show it
			}
			for _, ent := range ents {
				if err := copyOne(filepath.Join(src, ent.Name()), filepath.Join(dst, ent.Name()), depth+1); err != nil {
					return err
				}
			}
			return nil
		case fi.Mode().IsRegular():
			if fi.Mode().Perm()&0o004 == 0 {
				return nil // not world-readable (a private key): not copied
			}
			if budget -= fi.Size(); budget < 0 {
				return fmt.Errorf("environment: sandbox /etc: %s and the rest exceed %d bytes", src, maxEtcBytes)
			}
			b, err := os.ReadFile(src)
			if err != nil {
				return nil
			}
			return os.WriteFile(dst, b, fi.Mode().Perm())
		}
		return nil
	}
	for _, name := range sandboxEtc {
		if err := copyOne(filepath.Join("/etc", name), filepath.Join(dst, name), 0); err != nil {
			return fmt.Errorf("environment: sandbox /etc: %w", err)
		}
	}
	return nil
}

// DefaultPythonCacheSize bounds a PythonCache made with size 0: a server
// names few interpreters (one per profile at most), so more entries mean
// a caller asking with names from outside.
const DefaultPythonCacheSize = 16

// PythonCache remembers where interpreters live, so that a sandbox asks
// an interpreter once per owner (a module, a server) rather than once per
// session: through a version manager's shim the question costs tens of
// milliseconds. It belongs to whoever makes the sandboxes, so two servers
// in one process do not share answers, and it is bounded. It is safe for
// concurrent use; the zero value is not, use NewPythonCache.
type PythonCache struct {
	mu  sync.Mutex
	max int
	m   map[string]pythonInfo // name → answer
}

// NewPythonCache returns an empty cache of at most size names; size 0
// means DefaultPythonCacheSize. Once full, further names are asked every
// time rather than evicting an answer in use.
func NewPythonCache(size int) *PythonCache {
	if size <= 0 {
		size = DefaultPythonCacheSize
	}
	return &PythonCache{max: size, m: make(map[string]pythonInfo)}
}

// Len is the number of names remembered.
func (c *PythonCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// resolve is resolvePython through the cache; a nil cache asks every
// time.
func (c *PythonCache) resolve(name string) (string, []string, error) {
	if c == nil {
		return resolvePython(name)
	}
	c.mu.Lock()
	pi, ok := c.m[name]
	c.mu.Unlock()
	if !ok {
		// Asked outside the lock: a slow interpreter must not hold up
		// the others. Two first askers both ask; the answers agree.
		pi = lookupPython(name)
		c.mu.Lock()
		// Only answers are kept: a failed look-up (a timeout, python3
		// installed later) is asked again next time.
		if _, ok := c.m[name]; !ok && pi.err == nil && len(c.m) < c.max {
			c.m[name] = pi
		}
		c.mu.Unlock()
	}
	return pi.exe, pi.prefixes, pi.err
}

type pythonInfo struct {
	exe      string
	prefixes []string
	err      error
}

// ResolvePython returns the executable the interpreter command name
// really runs (sys.executable): a version manager's shim (pyenv, asdf) is
// a script that would start a second process, and cost tens of
// milliseconds, on every start. It asks the interpreter each time;
// callers keep the answer (code mode does, once per module).
func ResolvePython(name string) (string, error) {
	exe, _, err := resolvePython(name)
	return exe, err
}

// resolvePython is ResolvePython plus the installation directories
// outside /usr that the interpreter needs (mounted into sandboxes).
func resolvePython(name string) (string, []string, error) {
	pi := lookupPython(name)
	return pi.exe, pi.prefixes, pi.err
}

func lookupPython(name string) pythonInfo {
	path, err := exec.LookPath(name)
	if err != nil {
		return pythonInfo{err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-I", "-c", "import sys; print(sys.executable); print(sys.prefix); print(sys.base_prefix)").Output()
	if err != nil {
		return pythonInfo{err: fmt.Errorf("environment: ask %s where it lives: %w", path, err)}
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !filepath.IsAbs(lines[0]) {
		return pythonInfo{err: fmt.Errorf("environment: %s answered %q for its location", path, out)}
	}
	// sys.executable as it is, not symlink-resolved: a virtualenv's
	// python is a symlink whose location selects the venv.
	exe := lines[0]
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return pythonInfo{err: fmt.Errorf("environment: %s: %w", exe, err)}
	}
	var prefixes []string
	seen := map[string]bool{}
	for _, p := range append([]string{filepath.Dir(filepath.Dir(real))}, lines[1:]...) {
		rp, err := filepath.EvalSymlinks(p)
		if err != nil || seen[rp] || underSystem(rp) {
			continue
		}
		seen[rp] = true
		prefixes = append(prefixes, rp)
	}
	return pythonInfo{exe: exe, prefixes: prefixes}
}

// underSystem reports whether p is inside a directory the sandbox always
// mounts.
func underSystem(p string) bool {
	for _, d := range sandboxSystem {
		if beneath(p, d) {
			return true
		}
	}
	return false
}

var (
	_ Environment       = (*SandboxEnvironment)(nil)
	_ PythonInterpreter = (*SandboxEnvironment)(nil)
	_ ClosedNotifier    = (*SandboxEnvironment)(nil)
	_ FileOpener        = (*SandboxEnvironment)(nil)
)
