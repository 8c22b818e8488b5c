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
	// AllowPaths are extra roots that pass confinement, such as the
	// directory holding code mode's tool stubs.
	AllowPaths []string
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
// descendant. A descendant that calls setsid (a double-forked daemon)
// leaves the group and escapes both; that is the price of not tracing
// every process.
type LocalEnvironment struct {
	workspace string   // absolute, cleaned, as configured
	realRoots []string // symlink-free workspace and AllowPaths, for Confine
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
		p, err := expandHome(p)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(ws, p)
		}
		real, err := realPath(filepath.Clean(p))
		if err != nil {
			return nil, fmt.Errorf("environment: allowed path %q: %w", p, err)
		}
		e.realRoots = append(e.realRoots, real)
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
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if e.isClosed() {
		return nil, ErrClosed
	}
	var name string
	var args []string
	switch {
	case spec.Command != "" && len(spec.Argv) > 0:
		return nil, errors.New("environment: spec sets both Command and Argv; set exactly one")
	case spec.Command != "":
		if e.shell == "" {
			return nil, errNoShell
		}
		name, args = e.shell, []string{"-c", spec.Command}
	case len(spec.Argv) > 0:
		if spec.Argv[0] == "" {
			return nil, errors.New("environment: spec Argv[0] is empty")
		}
		name, args = spec.Argv[0], spec.Argv[1:]
	default:
		return nil, errors.New("environment: spec sets neither Command nor Argv; set exactly one")
	}

	dir := e.workspace
	if spec.Dir != "" {
		d, err := e.ResolvePath(spec.Dir)
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := checkEnv(spec.Env); err != nil {
		return nil, err
	}
	env := os.Environ()
	env = append(env, e.extraEnv...)
	env = append(env, spec.Env...)

	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			if err == syscall.ESRCH {
				return os.ErrProcessDone
			}
			return err
		}
		return nil
	}
	cmd.WaitDelay = e.waitDelay

	p, err := startProcess(cmd, spec.KeepStdin, e.waitDelay)
	if err != nil {
		return nil, fmt.Errorf("environment: start %s: %w", name, err)
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
		}
	}
}

func (e *LocalEnvironment) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

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
	e.mu.Unlock()

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
			default:
				errs = append(errs, fmt.Errorf("environment: process %d still running after SIGKILL", p.pid))
			}
			continue
		}
		select {
		case <-p.done:
		case <-timeout.C:
			expired = true
			errs = append(errs, fmt.Errorf("environment: process %d still running after SIGKILL", p.pid))
		}
	}
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
)
