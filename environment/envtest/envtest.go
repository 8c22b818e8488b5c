// Package envtest is the Environment contract as a test suite: Run checks
// an implementation of environment.Environment the way every tool relies
// on it (spawning by string and argv, killing the whole tree, files,
// workspace, Close). The local and sandbox environments both pass it; a
// plugin's environment can run it too.
//
// It also holds the helpers the escape tests share: Lock and WaitUnlocked
// prove a process tree is gone without seeing its pids (a sandbox's pids
// are in another namespace).
package envtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// Timeout bounds every wait in the suite, so a bug fails a test instead of
// hanging it.
const Timeout = 20 * time.Second

// Factory makes the environment under test for a workspace directory; the
// suite closes it (a second Close must be harmless).
type Factory func(t *testing.T, workspace string) environment.Environment

// Result is everything a finished process produced.
type Result struct {
	Stdout, Stderr string
	Code           int
	Err            error
}

// Collect reads both streams to the end and waits for p; after Timeout it
// kills p and fails the test.
func Collect(t testing.TB, p environment.Process) Result {
	t.Helper()
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(&out, p.Stdout()) })
	wg.Go(func() { io.Copy(&errb, p.Stderr()) })
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(Timeout):
		p.Signal(true)
		t.Fatalf("process %d: output did not end within %v", p.Pid(), Timeout)
	}
	code, err := Wait(t, p)
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code, Err: err}
}

// Wait waits for p, failing the test after Timeout.
func Wait(t testing.TB, p environment.Process) (int, error) {
	t.Helper()
	type res struct {
		code int
		err  error
	}
	ch := make(chan res, 1)
	go func() { c, err := p.Wait(); ch <- res{c, err} }()
	select {
	case r := <-ch:
		return r.code, r.err
	case <-time.After(Timeout):
		p.Signal(true)
		t.Fatalf("process %d did not exit within %v", p.Pid(), Timeout)
		return 0, nil
	}
}

// Run runs the contract against environments made by newEnv.
func Run(t *testing.T, newEnv Factory) {
	mk := func(t *testing.T) (environment.Environment, string) {
		t.Helper()
		ws := t.TempDir()
		e := newEnv(t, ws)
		t.Cleanup(func() { e.Close() })
		return e, ws
	}
	t.Run("Spawn", func(t *testing.T) {
		t.Parallel()
		e, ws := mk(t)
		if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		real, err := filepath.EvalSymlinks(ws)
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			spec environment.Spec
			want Result
		}{
			{"command", environment.Spec{Command: "echo hello; echo world"}, Result{Stdout: "hello\nworld\n"}},
			{"argv is not shell-parsed", environment.Spec{Argv: []string{"printf", "%s|%s", "a b", "$HOME"}}, Result{Stdout: "a b|$HOME"}},
			{"exit code and stderr", environment.Spec{Command: "echo out; echo oops >&2; exit 3"}, Result{Stdout: "out\n", Stderr: "oops\n", Code: 3}},
			{"default dir is the workspace", environment.Spec{Argv: []string{"pwd", "-P"}}, Result{Stdout: real + "\n"}},
			{"relative dir", environment.Spec{Argv: []string{"pwd", "-P"}, Dir: "sub"}, Result{Stdout: filepath.Join(real, "sub") + "\n"}},
			{"env wins", environment.Spec{Command: `echo "$BUB_T"`, Env: []string{"BUB_T=x"}}, Result{Stdout: "x\n"}},
			{"stdin is at EOF", environment.Spec{Argv: []string{"cat"}}, Result{}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p, err := e.Spawn(t.Context(), tt.spec)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, Collect(t, p), cmp.Comparer(sameError)); diff != "" {
					t.Errorf("Spawn(%+v) (-want +got):\n%s", tt.spec, diff)
				}
			})
		}
	})
	t.Run("SpawnErrors", func(t *testing.T) {
		t.Parallel()
		e, _ := mk(t)
		for _, spec := range []environment.Spec{{}, {Command: "true", Argv: []string{"true"}}, {Command: "x", Env: []string{"NOEQUALS"}}} {
			if p, err := e.Spawn(t.Context(), spec); err == nil {
				p.Signal(true)
				t.Errorf("Spawn(%+v) = nil error; want one", spec)
			}
		}
	})
	t.Run("Stdin", func(t *testing.T) {
		t.Parallel()
		e, _ := mk(t)
		p, err := e.Spawn(t.Context(), environment.Spec{Argv: []string{"cat"}, KeepStdin: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WriteStdin([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if err := p.CloseStdin(); err != nil {
			t.Fatal(err)
		}
		if got := Collect(t, p); got.Stdout != "ping\n" || got.Code != 0 {
			t.Errorf("cat = %+v; want ping", got)
		}
		if err := p.WriteStdin([]byte("late")); !errors.Is(err, environment.ErrStdinClosed) {
			t.Errorf("WriteStdin after CloseStdin = %v; want ErrStdinClosed", err)
		}
		p, err = e.Spawn(t.Context(), environment.Spec{Argv: []string{"cat"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WriteStdin([]byte("x")); !errors.Is(err, environment.ErrStdinClosed) {
			t.Errorf("WriteStdin without KeepStdin = %v; want ErrStdinClosed", err)
		}
		Collect(t, p)
	})
	t.Run("StdinWriteGivesUp", func(t *testing.T) {
		t.Parallel()
		e, _ := mk(t)
		p, err := e.Spawn(t.Context(), environment.Spec{Command: "sleep 1000", KeepStdin: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Signal(true)
		w, ok := p.(environment.StdinContextWriter)
		if !ok {
			t.Skipf("%T does not implement environment.StdinContextWriter", p)
		}
		// Far more than a pipe holds, to a process that never reads: the
		// write must end with the context, not with the process.
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		big := make([]byte, 4<<20)
		n, err := w.WriteStdinContext(ctx, big)
		if !errors.Is(err, context.DeadlineExceeded) || n >= len(big) {
			t.Errorf("WriteStdinContext to a process that does not read = %d, %v; want fewer bytes and DeadlineExceeded", n, err)
		}
		// The abandoned write leaves stdin usable.
		if n, err := w.WriteStdinContext(t.Context(), nil); n != 0 || err != nil {
			t.Errorf("WriteStdinContext after an abandoned write = %d, %v; want 0, nil", n, err)
		}
		if err := p.Signal(true); err != nil {
			t.Fatal(err)
		}
		Wait(t, p)
	})
	for _, kill := range []bool{true, false} {
		name := "SignalTERMKillsTree"
		if kill {
			name = "SignalKILLKillsTree"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, ws := mk(t)
			lock := filepath.Join(ws, "lock")
			p := SpawnHolder(t, t.Context(), e, lock, false)
			if err := p.Signal(kill); err != nil {
				t.Fatalf("Signal(%v): %v", kill, err)
			}
			code, err := Wait(t, p)
			var se *environment.SignalError
			if code != -1 || !errors.As(err, &se) {
				t.Errorf("Wait() = %d, %v; want -1 and a *SignalError", code, err)
			}
			WaitUnlocked(t, lock)
			if err := p.Signal(true); err != nil {
				t.Errorf("Signal on a dead process = %v; want nil", err)
			}
		})
	}
	t.Run("CancelKillsTree", func(t *testing.T) {
		t.Parallel()
		e, ws := mk(t)
		ctx, cancel := context.WithCancel(t.Context())
		lock := filepath.Join(ws, "lock")
		p := SpawnHolder(t, ctx, e, lock, false)
		cancel()
		if _, err := Wait(t, p); err == nil {
			t.Error("Wait() after cancel = nil error; want the kill")
		}
		WaitUnlocked(t, lock)
	})
	t.Run("CloseKillsEverything", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		e := newEnv(t, ws)
		lock := filepath.Join(ws, "lock")
		SpawnHolder(t, context.WithoutCancel(t.Context()), e, lock, false)
		if err := e.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		WaitUnlocked(t, lock)
		if err := e.Close(); err != nil {
			t.Errorf("second Close = %v; want nil", err)
		}
		if _, err := e.Spawn(t.Context(), environment.Spec{Command: "true"}); !errors.Is(err, environment.ErrClosed) {
			t.Errorf("Spawn after Close = %v; want ErrClosed", err)
		}
		if n, ok := e.(environment.ClosedNotifier); ok {
			select {
			case <-n.Closed():
			default:
				t.Error("Closed() not closed after Close")
			}
		}
	})
	t.Run("Files", func(t *testing.T) {
		t.Parallel()
		e, ws := mk(t)
		ctx := t.Context()
		if !filepath.IsAbs(e.Workspace()) {
			t.Errorf("Workspace() = %q; want an absolute path", e.Workspace())
		}
		if err := e.WriteText(ctx, "a/b/c.txt", "héllo\n"); err != nil {
			t.Fatalf("WriteText: %v", err)
		}
		got, err := e.ReadText(ctx, filepath.Join(ws, "a", "b", "c.txt"))
		if err != nil || got != "héllo\n" {
			t.Errorf("ReadText = %q, %v; want the text written", got, err)
		}
		p, err := e.Spawn(ctx, environment.Spec{Argv: []string{"cat", "a/b/c.txt"}})
		if err != nil {
			t.Fatal(err)
		}
		if r := Collect(t, p); r.Stdout != "héllo\n" {
			t.Errorf("cat of a written file = %+v", r)
		}
		if err := e.WriteText(ctx, "a/b/c.txt", "short"); err != nil {
			t.Fatal(err)
		}
		if got, _ := e.ReadText(ctx, "a/b/c.txt"); got != "short" {
			t.Errorf("after overwrite ReadText = %q; want short", got)
		}
		if err := os.WriteFile(filepath.Join(ws, "bin"), []byte("a\x00b"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			path string
			want error
		}{{"missing", fs.ErrNotExist}, {"a", environment.ErrIsDir}, {"bin", environment.ErrBinary}} {
			if _, err := e.ReadText(ctx, tt.path); !errors.Is(err, tt.want) {
				t.Errorf("ReadText(%q) = %v; want %v", tt.path, err, tt.want)
			}
		}
		if err := e.WriteText(ctx, "a", "x"); !errors.Is(err, environment.ErrIsDir) {
			t.Errorf("WriteText on a directory = %v; want ErrIsDir", err)
		}
		rp, err := e.ResolvePath("a/../a/b")
		if err != nil || rp != filepath.Join(e.Workspace(), "a", "b") {
			t.Errorf("ResolvePath(a/../a/b) = %q, %v; want %q", rp, err, filepath.Join(e.Workspace(), "a", "b"))
		}
	})
	t.Run("OpenFile", func(t *testing.T) {
		t.Parallel()
		e, ws := mk(t)
		o, ok := e.(environment.FileOpener)
		if !ok {
			t.Skipf("%T does not implement environment.FileOpener", e)
		}
		ctx := t.Context()
		if err := e.WriteText(ctx, "d/f.txt", "a\x00b"); err != nil {
			t.Fatal(err)
		}
		f, err := o.OpenFile(ctx, "d/f.txt")
		if err != nil {
			t.Fatalf("OpenFile: %v", err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil || string(b) != "a\x00b" {
			t.Errorf("OpenFile content = %q, %v; want the bytes, unchecked", b, err)
		}
		if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			path string
			want string
		}{{"missing", "no such file"}, {"d", "is a directory"}, {"fifo", "not a regular file"}, {"/", ""}} {
			f, err := o.OpenFile(ctx, tt.path)
			if err == nil {
				f.Close()
				t.Errorf("OpenFile(%q) = nil error; want one", tt.path)
				continue
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("OpenFile(%q) = %v; want it to say %q", tt.path, err, tt.want)
			}
		}
	})
}

// SpawnHolder starts a tree whose last member holds an exclusive flock on
// lock for a long time; with daemon it leaves the process group and
// session first (setsid, then the shell exits at once). It returns when
// the lock is held.
func SpawnHolder(t testing.TB, ctx context.Context, e environment.Environment, lock string, daemon bool) environment.Process {
	t.Helper()
	cmd := `flock -x "$L" sh -c 'echo held; exec sleep 1000' & wait`
	if daemon {
		cmd = `setsid -f flock -x "$L" sh -c 'echo held > "$L.ready"; exec sleep 1000' </dev/null >/dev/null 2>&1; while [ ! -s "$L.ready" ]; do sleep 0.01; done; echo held`
	}
	p, err := e.Spawn(ctx, environment.Spec{Command: cmd, Env: []string{"L=" + lock}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(p.Stdout(), buf); err != nil || string(buf) != "held\n" {
		p.Signal(true)
		t.Fatalf("holder did not start: %q, %v", buf, err)
	}
	return p
}

// WaitUnlocked polls until nothing holds an flock on path, which proves
// every process of the tree that took it is gone, and fails the test
// after Timeout.
func WaitUnlocked(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		if !Locked(t, path) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still locked %v later: a process survived", path, Timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Locked reports whether some process holds an flock on path.
func Locked(t testing.TB, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	t.Fatalf("flock %s: %v", path, err)
	return false
}

// sameError compares errors by message, so tables can hold wanted errors.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return strings.Contains(b.Error(), a.Error()) || a.Error() == b.Error()
}

// RequireTreeTracking skips the test (fails it with CI=true) when the local environment cannot
// follow a setsid or double-forked daemon (no writable cgroup hierarchy:
// see environment.LocalEnvironment.TracksTrees).
func RequireTreeTracking(t testing.TB) {
	t.Helper()
	le, err := environment.NewLocal(nil)
	if err != nil {
		t.Fatal(err)
	}
	le.Close()
	testenv.MustHave(t, le.TracksTrees(), "a writable cgroup hierarchy (without one, setsid daemons escape the local environment)",
		"run as root, or in a container with a delegated cgroup v2 hierarchy")
}
