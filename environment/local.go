package environment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults for LocalOptions fields left zero.
const (
	// DefaultMaxReadBytes bounds ReadText so one huge file cannot flood a
	// tool result or the server's memory.
	DefaultMaxReadBytes = 10 << 20
	// DefaultWaitDelay is how long output may stay open after a process
	// exits before reads stop waiting for descendants.
	DefaultWaitDelay = 2 * time.Second
)

// closeTimeout bounds how long Close waits for killed processes to be
// reaped; SIGKILL cannot be ignored, so only a process stuck in the
// kernel takes longer.
const closeTimeout = 5 * time.Second

// LocalOptions configures a LocalEnvironment. The zero value is usable:
// every field says what its zero value means.
type LocalOptions struct {
	// Workspace is the directory relative paths resolve against and
	// processes start in. Empty means the current directory; "~" is
	// expanded and the result made absolute. It must exist.
	Workspace string
	// Confine refuses paths that resolve, through ".." or symlinks,
	// outside the workspace (and AllowPaths). It guards file tools
	// against mistakes; it is not a sandbox: spawned processes can still
	// reach anything the server can.
	Confine bool
	// AllowPaths are extra roots that pass confinement for reading only,
	// such as the directory holding code mode's tool stubs: a confined
	// environment refuses to write beneath them (ErrReadOnly), even where
	// they lie inside the workspace, so a model cannot plant Python that
	// code mode would later run.
	AllowPaths []string
	// Hidden are roots a confined environment's file operations refuse
	// (ErrOutsideWorkspace), through ".." and symlinks too, even where
	// they lie inside the workspace: the server's own home ($BUB_HOME,
	// with bub.toml and the audit log) under a workspace of "~". A path
	// is decided by its innermost root, so an AllowPath beneath a hidden
	// root stays readable. Without Confine they change nothing, and
	// spawned processes are never kept out.
	Hidden []string
	// Python is the interpreter code runs with; empty means "python3".
	Python string
	// ExtraEnv holds KEY=VALUE entries added to every process's
	// environment, before Spec.Env (which wins on the same key).
	ExtraEnv []string
	// MaxReadBytes caps ReadText. Zero means DefaultMaxReadBytes;
	// negative means no limit.
	MaxReadBytes int64
	// WaitDelay is how long, after a process exits, its output streams
	// may stay open because a descendant still holds them (a background
	// "sleep 1000 &"); then reads return what is buffered and end. It
	// also bounds the wait after ctx cancellation. Zero means
	// DefaultWaitDelay.
	WaitDelay time.Duration
}

// LocalEnvironment runs processes and file operations on the host, each
// process in its own process group so that Signal and Close reach every
// descendant. Where a cgroup hierarchy is writable (root, or a delegated
// cgroup2 subtree), each process also gets a cgroup of its own, and
// killing it kills the cgroup: a descendant that calls setsid (a
// double-forked daemon) leaves the group but not the cgroup. Without one
// (see TracksTrees) such a daemon escapes; and a process that is not a
// descendant (one started through a system service, at or cron) is never
// reached.
type LocalEnvironment struct {
	workspace string   // absolute, cleaned, as configured
	realRoots []string // symlink-free workspace and AllowPaths, for Confine
	readOnly  []string // symlink-free AllowPaths: readable, never written under Confine
	hidden    hiddenSet
	confine   bool
	python    string
	extraEnv  []string
	maxRead   int64
	waitDelay time.Duration
	shell     string // absolute path of bash or sh; empty if neither exists

	mu       sync.Mutex
	closed   bool
	closedCh chan struct{}              // closed when Close begins
	procs    map[*localProcess]struct{} // started and whose group may be alive
	trees    map[*ForkedTree]struct{}   // forked by a fork server, not released
}

// NewLocal returns an environment on the host. A nil opts means defaults;
// opts is copied, so later changes to it have no effect.
func NewLocal(opts *LocalOptions) (*LocalEnvironment, error) {
	var o LocalOptions
	if opts != nil {
		o = *opts
	}
	ws := o.Workspace
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("environment: workspace: %w", err)
		}
		ws = wd
	}
	ws, err := expandHome(ws)
	if err != nil {
		return nil, err
	}
	ws, err = filepath.Abs(ws)
	if err != nil {
		return nil, fmt.Errorf("environment: workspace %q: %w", o.Workspace, err)
	}
	fi, err := os.Stat(ws)
	if err != nil {
		return nil, fmt.Errorf("environment: workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("environment: workspace %s is not a directory", ws)
	}

	e := &LocalEnvironment{
		workspace: ws,
		confine:   o.Confine,
		python:    o.Python,
		extraEnv:  append([]string(nil), o.ExtraEnv...),
		maxRead:   o.MaxReadBytes,
		waitDelay: o.WaitDelay,
		procs:     make(map[*localProcess]struct{}),
		closedCh:  make(chan struct{}),
	}
	if e.python == "" {
		e.python = DefaultPython
	}
	if e.maxRead == 0 {
		e.maxRead = DefaultMaxReadBytes
	}
	if e.waitDelay <= 0 {
		e.waitDelay = DefaultWaitDelay
	}
	if err := checkEnv(e.extraEnv); err != nil {
		return nil, err
	}

	real, err := realPath(ws)
	if err != nil {
		return nil, fmt.Errorf("environment: workspace: %w", err)
	}
	e.realRoots = append(e.realRoots, real)
	for _, p := range o.AllowPaths {
		p, err := hostPath(p, ws)
		if err != nil {
			return nil, err
		}
		real, err := realPath(p)
		if err != nil {
			return nil, fmt.Errorf("environment: allowed path %q: %w", p, err)
		}
		e.realRoots = append(e.realRoots, real)
		e.readOnly = append(e.readOnly, real)
	}
	if e.hidden, err = newHiddenSet(o.Hidden, ws, e.realRoots); err != nil {
		return nil, err
	}

	if sh, err := exec.LookPath("bash"); err == nil {
		e.shell = sh
	} else if sh, err := exec.LookPath("sh"); err == nil {
		e.shell = sh
	}
	return e, nil
}

// Workspace is the absolute workspace directory.
func (e *LocalEnvironment) Workspace() string { return e.workspace }

// Python is the interpreter code runs with.
func (e *LocalEnvironment) Python() string { return e.python }

// Spawn starts spec in its own process group. See Environment.Spawn.
func (e *LocalEnvironment) Spawn(ctx context.Context, spec Spec) (Process, error) {
	return e.spawn(ctx, spec, nil)
}

// spawn is Spawn with files as descriptors 3, 4, ... of the process.
func (e *LocalEnvironment) spawn(ctx context.Context, spec Spec, files []*os.File) (Process, error) {
	l, err := e.prepare(ctx, spec)
	if err != nil {
		return nil, err
	}
	l.files = files
	l.env = os.Environ()
	l.env = append(l.env, e.extraEnv...)
	l.env = append(l.env, spec.Env...)
	l.keepStdin = spec.KeepStdin
	if h := trackingCgroups(); h != nil {
		// Without its own cgroup the tree is still killed by process
		// group; only a descendant that calls setsid escapes then. So
		// a cgroup that cannot be made or entered is no reason to fail.
		if cg, err := h.newCgroup(0); err == nil {
			tracked := l
			if cg.wrap(&tracked) {
				p, err := e.start(ctx, tracked)
				if err == nil || errors.Is(err, ErrClosed) {
					return p, err
				}
			} else {
				cg.remove()
			}
		}
	}
	return e.start(ctx, l)
}

// launch is a process about to start on the host: what start runs,
// after an environment has wrapped the spec (a sandbox puts bwrap in
// front).
type launch struct {
	name      string
	args      []string
	dir       string   // host working directory
	env       []string // the complete environment
	keepStdin bool
	// cleanup, if set, runs once after the process has exited and its
	// output has ended (a sandbox removes its cgroup).
	cleanup func()
	// kill, if set, is run besides the group SIGKILL (a cgroup kill
	// reaches processes that left the group).
	kill func()
	// alive, if set, reports whether anything the process started is
	// left, besides its group (the cgroup is populated).
	alive func() bool
	// cgroupFD, if >= 0, is the cgroup2 directory the kernel starts
	// the process in (CLONE_INTO_CGROUP).
	cgroupFD int
	// files become descriptors 3, 4, ... of the process.
	files []*os.File
}

// prepare checks ctx and spec and returns the words to run, the
// directory (resolved like ResolvePath) and spec.Env checked.
func (e *LocalEnvironment) prepare(ctx context.Context, spec Spec) (launch, error) {
	if err := checkCtx(ctx); err != nil {
		return launch{}, err
	}
	if e.isClosed() {
		return launch{}, ErrClosed
	}
	l := launch{cgroupFD: -1}
	switch {
	case spec.Command != "" && len(spec.Argv) > 0:
		return launch{}, errors.New("environment: spec sets both Command and Argv; set exactly one")
	case spec.Command != "":
		if e.shell == "" {
			return launch{}, errNoShell
		}
		l.name, l.args = e.shell, []string{"-c", spec.Command}
	case len(spec.Argv) > 0:
		if spec.Argv[0] == "" {
			return launch{}, errors.New("environment: spec Argv[0] is empty")
		}
		l.name, l.args = spec.Argv[0], spec.Argv[1:]
	default:
		return launch{}, errors.New("environment: spec sets neither Command nor Argv; set exactly one")
	}
	l.dir = e.workspace
	if spec.Dir != "" {
		d, err := e.ResolvePath(spec.Dir)
		if err != nil {
			return launch{}, err
		}
		l.dir = d
	}
	if err := checkEnv(spec.Env); err != nil {
		return launch{}, err
	}
	return l, nil
}

// start runs l in a new process group that ctx's end kills, and tracks
// it for Close.
func (e *LocalEnvironment) start(ctx context.Context, l launch) (Process, error) {
	cmd := exec.CommandContext(ctx, l.name, l.args...)
	cmd.Dir = l.dir
	cmd.Env = l.env
	cmd.ExtraFiles = l.files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if l.cgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = l.cgroupFD
	}
	cmd.Cancel = func() error {
		if l.kill != nil {
			l.kill()
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			if err == syscall.ESRCH {
				return os.ErrProcessDone
			}
			return err
		}
		return nil
	}
	cmd.WaitDelay = e.waitDelay

	p, err := startProcess(cmd, l, e.waitDelay)
	if err != nil {
		if l.cleanup != nil {
			l.cleanup()
		}
		return nil, fmt.Errorf("environment: start %s: %w", l.name, err)
	}

	e.mu.Lock()
	if e.closed {
		// Close ran while we were starting: it could not see this
		// process, so end it here.
		e.mu.Unlock()
		_ = p.signalGroup(syscall.SIGKILL)
		p.cutOutput()
		<-p.exited
		return nil, ErrClosed
	}
	e.pruneLocked()
	e.procs[p] = struct{}{}
	e.mu.Unlock()
	return p, nil
}

// pruneLocked forgets processes whose whole group is gone, so a long
// session does not accumulate them. A group outlives its leader while
// background descendants remain, and Close must still reach those.
func (e *LocalEnvironment) pruneLocked() {
	for p := range e.procs {
		if !p.Running() && !p.groupAlive() {
			delete(e.procs, p)
			p.runCleanup()
		}
	}
}

func (e *LocalEnvironment) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// TracksTrees reports whether processes get a cgroup of their own, so
// that Signal, a cancelled ctx and Close also reach descendants that left
// the process group (setsid, double-forked daemons). It needs a cgroup
// hierarchy the server may write to: cgroup2 (preferred) or v1's pids.
func (e *LocalEnvironment) TracksTrees() bool { return trackingCgroups() != nil }

// Closed returns a channel closed when Close begins (ClosedNotifier).
func (e *LocalEnvironment) Closed() <-chan struct{} { return e.closedCh }

// Close kills (SIGKILL) the process group of every process the environment
// started whose group still has members, cuts their output
// streams and waits for them to be reaped. Later Spawn calls fail with
// ErrClosed; a second Close does nothing.
func (e *LocalEnvironment) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.closedCh)
	procs := e.procs
	e.procs = nil
	trees := e.trees
	e.trees = nil
	e.mu.Unlock()

	for t := range trees {
		t.Release()
	}
	var errs []error
	for p := range procs {
		if err := p.signalGroup(syscall.SIGKILL); err != nil {
			errs = append(errs, err)
		}
		_ = p.CloseStdin()
		p.cutOutput()
	}
	timeout := time.NewTimer(closeTimeout)
	defer timeout.Stop()
	expired := false
	for p := range procs {
		if expired {
			select {
			case <-p.done:
				p.runCleanup()
			default:
				errs = append(errs, fmt.Errorf("environment: process %d still running after SIGKILL", p.pid))
			}
			continue
		}
		select {
		case <-p.done:
			p.runCleanup()
		case <-timeout.C:
			expired = true
			errs = append(errs, fmt.Errorf("environment: process %d still running after SIGKILL", p.pid))
		}
	}
	removeBase()
	return errors.Join(errs...)
}

// errNoShell is Spawn's error for a Command when NewLocal found no shell.
var errNoShell = errors.New("environment: neither bash nor sh found in PATH")

// checkEnv rejects entries that are not KEY=VALUE, which exec would
// otherwise pass through as garbage.
func checkEnv(env []string) error {
	for _, kv := range env {
		if i := strings.IndexByte(kv, '='); i <= 0 {
			return fmt.Errorf("environment: env entry %q is not KEY=VALUE", kv)
		}
		if strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("environment: env entry %q contains a NUL byte", kv)
		}
	}
	return nil
}

var (
	_ Environment       = (*LocalEnvironment)(nil)
	_ PythonInterpreter = (*LocalEnvironment)(nil)
	_ ClosedNotifier    = (*LocalEnvironment)(nil)
	_ FileOpener        = (*LocalEnvironment)(nil)
)
