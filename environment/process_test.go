package environment

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/proctest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

func TestSpawn(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", "hello.sh"), []byte("#!/bin/sh\necho \"hello $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	realWS, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, &LocalOptions{Workspace: ws, ExtraEnv: []string{"BUB_EXTRA=extra", "BUB_OVER=extra"}})

	tests := []struct {
		name  string
		spec  Spec
		stdin string // written then closed when spec.KeepStdin
		want  result
	}{
		{
			name: "command",
			spec: Spec{Command: "echo hello; echo world"},
			want: result{Stdout: "hello\nworld\n"},
		},
		{
			name: "command uses bash",
			spec: Spec{Command: `[[ -n "$BASH_VERSION" ]] && echo bash`},
			want: result{Stdout: "bash\n"},
		},
		{
			name: "argv is not shell-parsed",
			spec: Spec{Argv: []string{"printf", "%s|%s", "a b", "$HOME"}},
			want: result{Stdout: "a b|$HOME"},
		},
		{
			name: "exit code",
			spec: Spec{Command: "exit 3"},
			want: result{Code: 3},
		},
		{
			name: "stderr kept apart",
			spec: Spec{Command: "echo out; echo oops >&2; exit 1"},
			want: result{Stdout: "out\n", Stderr: "oops\n", Code: 1},
		},
		{
			name: "default dir is workspace",
			spec: Spec{Argv: []string{"pwd", "-P"}},
			want: result{Stdout: realWS + "\n"},
		},
		{
			name: "relative dir",
			spec: Spec{Argv: []string{"pwd", "-P"}, Dir: "sub"},
			want: result{Stdout: filepath.Join(realWS, "sub") + "\n"},
		},
		{
			name: "relative argv0 runs from dir",
			spec: Spec{Argv: []string{"./hello.sh", "there"}, Dir: "sub"},
			want: result{Stdout: "hello there\n"},
		},
		{
			name: "env added to inherited",
			spec: Spec{Command: `echo "$BUB_SPEC $BUB_EXTRA $BUB_OVER ${PATH:+path}"`, Env: []string{"BUB_SPEC=spec", "BUB_OVER=spec"}},
			want: result{Stdout: "spec extra spec path\n"},
		},
		{
			name: "stdin at EOF by default",
			spec: Spec{Argv: []string{"cat"}},
			want: result{},
		},
		{
			name: "read in shell at EOF by default",
			spec: Spec{Command: "read -r line; echo \"status $?\""},
			want: result{Stdout: "status 1\n"},
		},
		{
			name:  "stdin written then closed",
			spec:  Spec{Argv: []string{"cat"}, KeepStdin: true},
			stdin: "line one\nline two",
			want:  result{Stdout: "line one\nline two"},
		},
		{
			name: "killed by signal",
			spec: Spec{Command: "kill -TERM $$"},
			want: result{Code: -1, Err: &SignalError{Signal: syscall.SIGTERM}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := e.Spawn(t.Context(), tt.spec)
			if err != nil {
				t.Fatalf("Spawn(%+v): %v", tt.spec, err)
			}
			if tt.spec.KeepStdin {
				if err := p.WriteStdin([]byte(tt.stdin)); err != nil {
					t.Fatalf("WriteStdin: %v", err)
				}
				if err := p.CloseStdin(); err != nil {
					t.Fatalf("CloseStdin: %v", err)
				}
			}
			got := collect(t, p)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(sameError)); diff != "" {
				t.Errorf("Spawn(%+v) result mismatch (-want +got):\n%s", tt.spec, diff)
			}
			if p.Running() {
				t.Errorf("Running() = true after Wait")
			}
			waitDone(t, p)
		})
	}
}

// sameError compares errors by message, enough for these tables.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

func TestSpawnErrors(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, &LocalOptions{Confine: true})
	tests := []struct {
		name    string
		spec    Spec
		wantIs  error
		wantMsg string
	}{
		{name: "neither", spec: Spec{}, wantMsg: "environment: spec sets neither Command nor Argv; set exactly one"},
		{name: "both", spec: Spec{Command: "true", Argv: []string{"true"}}, wantMsg: "environment: spec sets both Command and Argv; set exactly one"},
		{name: "empty argv0", spec: Spec{Argv: []string{""}}, wantMsg: "environment: spec Argv[0] is empty"},
		{name: "not found", spec: Spec{Argv: []string{"bub-no-such-command"}}, wantIs: exec.ErrNotFound},
		{name: "bad env", spec: Spec{Command: "true", Env: []string{"NOEQUALS"}}, wantMsg: `environment: env entry "NOEQUALS" is not KEY=VALUE`},
		{name: "dir outside confined workspace", spec: Spec{Command: "true", Dir: "/"}, wantIs: ErrOutsideWorkspace},
		{name: "missing dir", spec: Spec{Command: "true", Dir: "nope"}, wantIs: syscall.ENOENT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := e.Spawn(t.Context(), tt.spec)
			if err == nil {
				p.Signal(true)
				t.Fatalf("Spawn(%+v) succeeded; want error", tt.spec)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Spawn(%+v) = %v; want errors.Is %v", tt.spec, err, tt.wantIs)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("Spawn(%+v) = %q; want %q", tt.spec, err, tt.wantMsg)
			}
			if !strings.HasPrefix(err.Error(), "environment: ") {
				t.Errorf("error %q lacks the environment: prefix", err)
			}
		})
	}
	//lint:ignore SA1012 a nil ctx on purpose: Spawn must refuse it
	if _, err := e.Spawn(nil, Spec{Command: "true"}); err == nil {
		t.Errorf("Spawn(nil ctx) succeeded; want error")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.Spawn(ctx, Spec{Command: "true"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Spawn(cancelled ctx) = %v; want context.Canceled", err)
	}
}

// TestSpawnShFallback hides bash from PATH; commands then run under sh.
func TestSpawnShFallback(t *testing.T) {
	sh := testenv.MustHaveExec(t, "sh", "apt-get install -y dash")
	bin := t.TempDir()
	if err := os.Symlink(sh, filepath.Join(bin, "sh")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	e := newTestEnv(t, nil)
	if e.shell != filepath.Join(bin, "sh") {
		t.Fatalf("shell = %q; want %q", e.shell, filepath.Join(bin, "sh"))
	}
	p, err := e.Spawn(t.Context(), Spec{Command: `echo "$0"`})
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, p)
	if diff := cmp.Diff(result{Stdout: filepath.Join(bin, "sh") + "\n"}, got, cmp.Comparer(sameError)); diff != "" {
		t.Errorf("sh fallback (-want +got):\n%s", diff)
	}

	t.Setenv("PATH", t.TempDir())
	e2 := newTestEnv(t, nil)
	if _, err := e2.Spawn(t.Context(), Spec{Command: "true"}); err == nil || err.Error() != "environment: neither bash nor sh found in PATH" {
		t.Errorf("Spawn without any shell = %v; want the no-shell error", err)
	}
}

func TestStdin(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)

	p, err := e.Spawn(t.Context(), Spec{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WriteStdin([]byte("x")); !errors.Is(err, ErrStdinClosed) {
		t.Errorf("WriteStdin without KeepStdin = %v; want ErrStdinClosed", err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Errorf("CloseStdin without KeepStdin = %v; want nil", err)
	}
	collect(t, p)

	p, err = e.Spawn(t.Context(), Spec{Command: "head -n1", KeepStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	// Several writes, one line answered: stdin stays open across writes.
	for _, s := range []string{"fir", "st\n", "second\n"} {
		if err := p.WriteStdin([]byte(s)); err != nil {
			t.Fatalf("WriteStdin(%q): %v", s, err)
		}
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Errorf("second CloseStdin = %v; want nil", err)
	}
	if err := p.WriteStdin([]byte("late")); !errors.Is(err, ErrStdinClosed) {
		t.Errorf("WriteStdin after CloseStdin = %v; want ErrStdinClosed", err)
	}
	if got := collect(t, p); got.Stdout != "first\n" || got.Code != 0 {
		t.Errorf("head -n1 = %+v; want stdout %q, code 0", got, "first\n")
	}

	// A process that stops reading: writing fails instead of hanging.
	p, err = e.Spawn(t.Context(), Spec{Command: "exit 0", KeepStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, p)
	if err := p.WriteStdin([]byte("nobody listens")); err == nil {
		t.Errorf("WriteStdin after exit succeeded; want error")
	}
}

func TestWaitConcurrent(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	p, err := e.Spawn(t.Context(), Spec{Command: "read -r x; exit 7", KeepStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Running() {
		t.Fatal("Running() = false before the process could exit")
	}
	var wg sync.WaitGroup
	codes := make([]int, 16)
	for i := range codes {
		wg.Go(func() {
			c, err := p.Wait()
			if err != nil {
				t.Errorf("Wait: %v", err)
			}
			codes[i] = c
		})
	}
	p.CloseStdin()
	wg.Wait()
	for i, c := range codes {
		if c != 7 {
			t.Errorf("Wait() #%d = %d; want 7", i, c)
		}
	}
	if got := collect(t, p); got.Code != 7 {
		t.Errorf("Wait() after the others = %d; want 7", got.Code)
	}
	waitDone(t, p)
}

// spawnWithGrandchild starts a shell that puts "sleep 1000" in the
// background and, if wait is set, waits for it; it returns the process
// and the grandchild's PID.
func spawnWithGrandchild(t *testing.T, ctx context.Context, e Environment, wait bool) (Process, *bufio.Reader, int) {
	t.Helper()
	cmd := "sleep 1000 & echo $!"
	if wait {
		cmd += "; wait"
	}
	p, err := e.Spawn(ctx, Spec{Command: cmd})
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(p.Stdout())
	return p, r, readPID(t, r)
}

func TestSignalKillsGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kill bool
		want syscall.Signal
	}{
		{kill: true, want: syscall.SIGKILL},
		{kill: false, want: syscall.SIGTERM},
	}
	for _, tt := range tests {
		t.Run(tt.want.String(), func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, nil)
			p, _, grandchild := spawnWithGrandchild(t, t.Context(), e, true)
			if proctest.Gone(grandchild) {
				t.Fatalf("grandchild %d not running before Signal", grandchild)
			}
			if err := p.Signal(tt.kill); err != nil {
				t.Fatalf("Signal(%v): %v", tt.kill, err)
			}
			code, err := waitTimeout(t, p)
			var se *SignalError
			if code != -1 || !errors.As(err, &se) || se.Signal != tt.want {
				t.Fatalf("Wait() = %d, %v; want -1, killed by %v", code, err, tt.want)
			}
			if got, want := se.ExitCode(), 128+int(tt.want); got != want {
				t.Errorf("ExitCode() = %d; want %d", got, want)
			}
			waitGone(t, p.Pid())
			waitGone(t, grandchild)
			waitDone(t, p)
			for _, kill := range []bool{false, true} {
				if err := p.Signal(kill); err != nil {
					t.Errorf("Signal(%v) on a dead process = %v; want nil", kill, err)
				}
			}
		})
	}
}

func TestContextCancelKillsGroup(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	p, _, grandchild := spawnWithGrandchild(t, ctx, e, true)
	cancel()
	code, err := waitTimeout(t, p)
	var se *SignalError
	if code != -1 || !errors.As(err, &se) || se.Signal != syscall.SIGKILL {
		t.Fatalf("Wait() after cancel = %d, %v; want -1, SIGKILL", code, err)
	}
	waitGone(t, grandchild)
}

// TestOutputHeldByDescendant: a background grandchild keeps the output
// pipe open after the shell exits. Reads must end anyway, WaitDelay after
// the exit, without losing what the shell wrote.
func TestOutputHeldByDescendant(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, &LocalOptions{WaitDelay: 50 * time.Millisecond})

	t.Run("reader blocked", func(t *testing.T) {
		t.Parallel()
		p, err := e.Spawn(t.Context(), Spec{Command: "sleep 1000 & echo hi; echo err >&2"})
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, p)
		if diff := cmp.Diff(result{Stdout: "hi\n", Stderr: "err\n"}, got, cmp.Comparer(sameError)); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		waitDone(t, p)
	})

	t.Run("reader late", func(t *testing.T) {
		t.Parallel()
		p, err := e.Spawn(t.Context(), Spec{Command: "sleep 1000 & printf 'kept %.0s' $(seq 1000)"})
		if err != nil {
			t.Fatal(err)
		}
		// Nobody reads until after Done: the buffered output survives.
		waitDone(t, p)
		b, err := io.ReadAll(p.Stdout())
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("kept ", 1000); string(b) != want {
			t.Errorf("late read got %d bytes; want %d", len(b), len(want))
		}
		b, err = io.ReadAll(p.Stdout())
		if len(b) != 0 || err != nil {
			t.Errorf("read after end = %q, %v; want nothing", b, err)
		}
	})
}

// TestDoneAfterOutputEnds: Done waits for the reader to reach EOF when
// nothing holds the pipe, not for WaitDelay.
func TestDoneAfterOutputEnds(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, &LocalOptions{WaitDelay: time.Hour})
	p, err := e.Spawn(t.Context(), Spec{Command: "echo done"})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, p)
	waitDone(t, p)
}

func TestCloseKillsEverything(t *testing.T) {
	t.Parallel()
	e, err := NewLocal(&LocalOptions{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	waiting, _, gc1 := spawnWithGrandchild(t, ctx, e, true)
	// The shell exits at once; only its background child is left in the
	// group, and Close must still find it.
	orphaning, _, gc2 := spawnWithGrandchild(t, ctx, e, false)
	if code, err := waitTimeout(t, orphaning); code != 0 || err != nil {
		t.Fatalf("orphaning shell Wait() = %d, %v; want 0, nil", code, err)
	}
	// Another spawn prunes finished processes; the orphan's group must stay.
	other, err := e.Spawn(ctx, Spec{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, other)
	reading, err := e.Spawn(ctx, Spec{Argv: []string{"cat"}, KeepStdin: true})
	if err != nil {
		t.Fatal(err)
	}

	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, p := range []Process{waiting, orphaning, reading} {
		waitDone(t, p)
		if p.Running() {
			t.Errorf("process %d Running() after Close", p.Pid())
		}
		waitGone(t, p.Pid())
	}
	waitGone(t, gc1)
	waitGone(t, gc2)

	if err := e.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
	_, err = e.Spawn(ctx, Spec{Command: "true"})
	if !errors.Is(err, ErrClosed) || err.Error() != "environment: shell runtime is closed" {
		t.Errorf("Spawn after Close = %v; want %q", err, ErrClosed)
	}
}

// TestCloseDuringSpawns races Close against spawns: every process that
// Spawn returned must be dead afterwards, and every other Spawn must fail
// with ErrClosed.
func TestCloseDuringSpawns(t *testing.T) {
	t.Parallel()
	e, err := NewLocal(&LocalOptions{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		started []Process
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			for range 10 {
				p, err := e.Spawn(context.Background(), Spec{Argv: []string{"sleep", "1000"}})
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Spawn: %v", err)
					}
					return
				}
				mu.Lock()
				started = append(started, p)
				mu.Unlock()
			}
		})
	}
	close(start)
	time.Sleep(20 * time.Millisecond) // let some spawns through; not a proof of anything
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	for _, p := range started {
		code, err := waitTimeout(t, p)
		var se *SignalError
		if code != -1 || !errors.As(err, &se) {
			t.Errorf("process %d Wait() = %d, %v; want killed", p.Pid(), code, err)
		}
	}
}

func TestClosedNotifies(t *testing.T) {
	e, err := NewLocal(&LocalOptions{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var n ClosedNotifier = e
	select {
	case <-n.Closed():
		t.Fatal("Closed() is closed before Close")
	default:
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Closed():
	case <-time.After(testTimeout):
		t.Fatal("Closed() not closed after Close")
	}
	if err := e.Close(); err != nil { // a second Close must not close the channel again
		t.Fatal(err)
	}
}
