package builtin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// MaxShells caps the shells one environment keeps: running ones and exited
// ones whose output was not read yet. When the cap is reached, the oldest
// exited shell is forgotten to make room; if all are running, bash refuses
// to start another.
const MaxShells = 64

// shell is one command started by bash, in the foreground or background.
type shell struct {
	id   string
	seq  uint64 // start order, for evicting the oldest exited shell
	proc environment.Process
	out  *outputBuffer
	done chan struct{} // closed once the process exited and its output ended
	code int           // exit code, valid after done; -N after death by signal N
	// detached is set once no bash call waits for the shell any more
	// (background=true, or a foreground call that timed out).
	detached atomic.Bool
	// stdin says the shell was started with its stdin open (background
	// shells, for bash.input); stdinClosed that bash.input closed it.
	stdin       bool
	stdinClosed atomic.Bool
}

// finished reports whether the shell's process exited and its output
// ended.
func (s *shell) finished() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// shellTable keeps the shells of every environment a Module's tools ran
// in. It is keyed by the Environment value itself, so each session (which
// has its own Environment) sees only its own shells. An environment's
// entry goes away when its last shell is forgotten, once the environment
// is found closed (its Close killed the shells), or when the module is
// cleaned up. The zero value is ready to use.
type shellTable struct {
	// replica names this process among replicas sharing a store; it is
	// appended to shell ids ("bash-1a2b3c4d@r1") so a call that reaches
	// another replica says where the shell lives. "" on a file store.
	replica string

	mu     sync.Mutex
	seq    uint64
	envs   map[environment.Environment]map[string]*shell
	closed bool
	// done is closed by close, so the goroutines watching environments
	// for their end stop with the module.
	done chan struct{}
	// bufs recycles the read buffers of pump.
	bufs sync.Pool
}

// errUnknownShell is the not_found error for a shell id this environment
// does not know (never started, or already reaped), or that another
// replica started: background shells stay on the replica that ran them.
func (t *shellTable) errUnknownShell(id string) *registry.Error {
	if i := strings.LastIndexByte(id, '@'); i >= 0 && id[i+1:] != t.replica {
		here := t.replica
		if here == "" {
			here = "(none: this process has no replica name)"
		}
		return fail(registry.KindNotFound, "shell %s lives on replica %s, and this is replica %s: background shells stay where they were started; route this client to one replica (sticky sessions) to use them across calls", id, id[i+1:], here)
	}
	return fail(registry.KindNotFound, "unknown shell id: %s", id)
}

// errShutDown refuses new shells once the module was cleaned up.
func errShutDown() *registry.Error {
	return fail(registry.KindConfig, "bash cannot start a shell: the builtin tools were shut down")
}

// reserve checks that env can hold another shell, evicting the oldest
// exited one if needed.
func (t *shellTable) reserve(env environment.Environment) error {
	if !reflect.ValueOf(env).Comparable() {
		return fail(registry.KindConfig, "environment type %T cannot hold shells: it is not comparable", env)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errShutDown()
	}
	m := t.envs[env]
	if len(m) < MaxShells {
		return nil
	}
	var oldest *shell
	for _, s := range m {
		if s.finished() && (oldest == nil || s.seq < oldest.seq) {
			oldest = s
		}
	}
	if oldest == nil {
		return fail(registry.KindTemporary, "too many shells running in this session (%d); stop some with bash.kill", MaxShells)
	}
	delete(m, oldest.id)
	return nil
}

// add registers s under a fresh id; it fails once the table is closed.
func (t *shellTable) add(env environment.Environment, s *shell) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errShutDown()
	}
	if t.envs == nil {
		t.envs = map[environment.Environment]map[string]*shell{}
		t.done = make(chan struct{})
	}
	m := t.envs[env]
	if m == nil {
		m = map[string]*shell{}
		t.envs[env] = m
		if n, ok := env.(environment.ClosedNotifier); ok {
			// Close kills the shells; forget them with it.
			go func(done <-chan struct{}) {
				select {
				case <-n.Closed():
					t.dropEnv(env)
				case <-done:
				}
			}(t.done)
		}
	}
	for {
		s.id = newShellID(t.replica)
		if _, taken := m[s.id]; !taken {
			break
		}
	}
	t.seq++
	s.seq = t.seq
	m[s.id] = s
	return nil
}

func (t *shellTable) get(env environment.Environment, id string) (*shell, error) {
	if !reflect.ValueOf(env).Comparable() {
		return nil, t.errUnknownShell(id)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.envs[env][id]; ok {
		return s, nil
	}
	return nil, t.errUnknownShell(id)
}

// remove forgets a shell; its output is gone afterwards.
func (t *shellTable) remove(env environment.Environment, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.envs[env]
	delete(m, id)
	if len(m) == 0 {
		delete(t.envs, env)
	}
}

// dropEnv forgets every shell of a closed environment.
func (t *shellTable) dropEnv(env environment.Environment) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.envs, env)
}

// close refuses new shells, forgets every shell and kills the process
// groups of those still running: the module that owns them is going away.
func (t *shellTable) close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	envs := t.envs
	t.envs = nil
	if t.done != nil {
		close(t.done)
	}
	t.mu.Unlock()
	for _, m := range envs {
		for _, s := range m {
			if !s.finished() {
				_ = s.proc.Signal(true)
			}
		}
	}
}

func newShellID(replica string) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	id := "bash-" + hex.EncodeToString(b[:])
	if replica != "" {
		id += "@" + replica
	}
	return id
}

// start runs command through env's shell in its own process group and
// registers it. Its output is read into the shell's buffer until the
// process ends; the process outlives ctx (bash decides when to kill it).
// missingDir explains a failed start by its working directory, when that
// is what is missing: exec reports a missing directory as a missing
// program ("fork/exec /usr/bin/bash: no such file or directory"). It is
// asked only after a failure, so an environment whose file system differs
// from the host's (a sandbox) is never refused a directory it has.
func missingDir(env environment.Environment, cwd string) *registry.Error {
	if cwd == "" {
		return nil
	}
	dir, err := env.ResolvePath(cwd)
	if err != nil {
		return nil
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &registry.Error{Kind: registry.KindNotFound, Message: fmt.Sprintf("working directory %s does not exist", dir), Cause: err}
	case err == nil && !st.IsDir():
		return &registry.Error{Kind: registry.KindInvalidInput, Message: fmt.Sprintf("working directory %s is not a directory", dir)}
	}
	return nil
}

// start's keepStdin leaves the shell's stdin open for bash.input;
// otherwise it is at end-of-file from the start, as in Bub.
func (t *shellTable) start(ctx context.Context, env environment.Environment, command, cwd string, keepStdin bool) (*shell, error) {
	if err := t.reserve(env); err != nil {
		return nil, err
	}
	proc, err := env.Spawn(context.WithoutCancel(ctx), environment.Spec{Command: command, Dir: cwd, KeepStdin: keepStdin})
	if err != nil {
		if errors.Is(err, environment.ErrClosed) {
			t.dropEnv(env)
		}
		if e := missingDir(env, cwd); e != nil {
			return nil, e
		}
		e := envError(err)
		e.Message = "cannot start the command: " + e.Message
		return nil, e
	}
	s := &shell{proc: proc, out: newOutputBuffer(DefaultOutputCap), done: make(chan struct{}), stdin: keepStdin}
	if err := t.add(env, s); err != nil {
		_ = proc.Signal(true)
		return nil, err
	}

	var pumps sync.WaitGroup
	for _, r := range []io.Reader{proc.Stdout(), proc.Stderr()} {
		pumps.Go(func() { t.pump(r, s.out) })
	}
	go func() {
		code, err := proc.Wait()
		pumps.Wait()
		s.code = exitCode(code, err)
		close(s.done)
		if _, notifies := env.(environment.ClosedNotifier); !notifies && s.detached.Load() && environmentClosed(env) {
			t.dropEnv(env)
		}
	}()
	return s, nil
}

// pump copies a stream into the buffer as text until it ends.
func (t *shellTable) pump(r io.Reader, out *outputBuffer) {
	var dec utf8Decoder
	b, _ := t.bufs.Get().(*[32 << 10]byte)
	if b == nil {
		b = new([32 << 10]byte)
	}
	defer t.bufs.Put(b)
	buf := b[:]
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out.write(dec.decode(buf[:n]))
		}
		if err != nil {
			break
		}
	}
	out.write(dec.flush())
}

// exitCode reports a signal death as Python does: minus the signal number.
func exitCode(code int, err error) int {
	var se *environment.SignalError
	if errors.As(err, &se) {
		return -int(se.Signal)
	}
	return code
}

// environmentClosed reports whether env was closed, for environments that
// do not implement environment.ClosedNotifier: the contract promises that
// Spawn fails with ErrClosed after Close, and an empty Spec is invalid, so
// the probe never starts anything on a live environment.
func environmentClosed(env environment.Environment) bool {
	p, err := env.Spawn(context.Background(), environment.Spec{})
	if p != nil { // a non-conforming environment ran an empty spec
		_ = p.Signal(true)
	}
	return errors.Is(err, environment.ErrClosed)
}

// waitDone waits until the shell finished, ctx ended or d passed; it
// reports whether the shell finished.
func waitDone(ctx context.Context, s *shell, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.done:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return s.finished()
}
