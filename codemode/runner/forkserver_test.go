package runner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
)

// newForkRunner returns a runner forking from a fork server in a local
// environment, its server ready.
func newForkRunner(t *testing.T, opts Options) (*Runner, *environment.LocalEnvironment) {
	t.Helper()
	le, err := environment.NewLocal(&environment.LocalOptions{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { le.Close() })
	opts.Python, opts.Start, opts.Prestart, opts.Fork = testPython, EnvStart(le), true, EnvForkStart(le)
	r := New(&opts)
	t.Cleanup(func() { r.Close() })
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !r.Forking() {
		t.Fatal("Forking() = false after WaitReady")
	}
	return r, le
}

// serverPid is the fork server's pid.
func serverPid(t *testing.T, r *Runner) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fsrv == nil {
		t.Fatal("no fork server")
	}
	return r.fsrv.proc.(envProcess).Pid()
}

func TestForkServer(t *testing.T) {
	t.Parallel()
	r, _ := newForkRunner(t, Options{Pool: 2, Idle: time.Hour})
	zygote := strconv.Itoa(serverPid(t, r))
	// More concurrent runs than children forked ahead: each in a fresh
	// interpreter, a child of the fork server.
	var wg sync.WaitGroup
	outs := make([]string, 6)
	for i := range outs {
		wg.Go(func() {
			out, err := r.Run(t.Context(), Request{Code: "import os\nprint(os.getpid(), os.getppid())"})
			if err != nil {
				t.Errorf("Run: %v", err)
			}
			outs[i] = strings.TrimSpace(out)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, o := range outs {
		pid, parent, _ := strings.Cut(o, " ")
		if seen[pid] || parent != zygote {
			t.Errorf("runs (pid parent) = %v; want each its own, forked by %s", outs, zygote)
		}
		seen[pid] = true
	}
	// Crash, timeout and tool calls behave as in a started interpreter.
	_, err := r.Run(t.Context(), Request{Code: "import os\nos._exit(7)"})
	var ce *CrashError
	if !errors.As(err, &ce) || ce.Code != 7 {
		t.Errorf("os._exit(7) = %v; want a CrashError with code 7", err)
	}
	_, err = r.Run(t.Context(), Request{Code: "import time\ntime.sleep(30)", Timeout: 200 * time.Millisecond})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Errorf("sleep past the timeout = %v; want a TimeoutError", err)
	}
	out, err := r.Run(t.Context(), Request{Code: "print(await tools.echo(a=1))", Tools: []string{"echo"}, Call: echoCall})
	if err != nil || out != "{'a': 1}\n" {
		t.Errorf("tool call = %q, %v", out, err)
	}
	if !r.Forking() {
		t.Error("Forking() = false after the runs")
	}
}

// TestForkServerRestarts: a fork server that dies is started again; the
// run that finds it dead starts its own interpreter.
func TestForkServerRestarts(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	r, _ := newForkRunner(t, Options{Idle: time.Hour, Log: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))})
	pid := serverPid(t, r)
	r.mu.Lock()
	r.fsrv.proc.Signal(true)
	r.mu.Unlock()
	waitGone(t, pid)
	if out, err := r.Run(t.Context(), Request{Code: "print(1)"}); err != nil || out != "1\n" {
		t.Fatalf("Run after the fork server died = %q, %v", out, err)
	}
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !r.Forking() || serverPid(t, r) == pid {
		t.Errorf("Forking() = %v with pid %d; want a new fork server", r.Forking(), serverPid(t, r))
	}
	if out, err := r.Run(t.Context(), Request{Code: "print(2)"}); err != nil || out != "2\n" {
		t.Errorf("Run on the new fork server = %q, %v", out, err)
	}
}

// TestForkServerFallsBack: where a fork server cannot start, the runner
// says so once and keeps a pool as without one.
func TestForkServerFallsBack(t *testing.T) {
	t.Parallel()
	var logs syncWriter
	broken := func(ctx context.Context, argv []string, files []*os.File) (Process, *environment.ForkPolicy, error) {
		return nil, nil, errors.New("no fork server here")
	}
	r := New(&Options{Python: testPython, Prestart: true, Pool: 2, Idle: time.Hour, Fork: broken,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { r.Close() })
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.Forking() || r.Spares() != 2 {
		t.Errorf("Forking() = %v, Spares() = %d; want the pool of 2", r.Forking(), r.Spares())
	}
	if out, err := r.Run(t.Context(), Request{Code: "print(1)"}); err != nil || out != "1\n" {
		t.Errorf("Run = %q, %v", out, err)
	}
	if got := logs.String(); strings.Count(got, "codemode.forkserver.off") != 1 || !strings.Contains(got, "no fork server here") {
		t.Errorf("log = %q; want one line saying why", got)
	}
}

// TestForkServerClosed: Close and the environment's Close end the fork
// server and a run in flight.
func TestForkServerClosed(t *testing.T) {
	t.Parallel()
	r, le := newForkRunner(t, Options{Idle: time.Hour})
	pid := serverPid(t, r)
	started := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background(), Request{Code: "print('up', flush=True)\nimport time\ntime.sleep(60)",
			Output: func(string) { once.Do(func() { close(started) }) }})
		done <- err
	}()
	<-started
	le.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("run in flight succeeded after the environment closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run in flight still running 10s after the environment closed")
	}
	r.Close()
	waitGone(t, pid)
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		s.w = &bytes.Buffer{}
	}
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return ""
	}
	return s.w.String()
}
