package environment

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/proctest"
)

// testTimeout bounds every wait in the tests, so a bug shows up as a
// failure instead of a hung test binary.
const testTimeout = 15 * time.Second

func newTestEnv(t *testing.T, opts *LocalOptions) *LocalEnvironment {
	t.Helper()
	var o LocalOptions
	if opts != nil {
		o = *opts
	}
	if o.Workspace == "" {
		o.Workspace = t.TempDir()
	}
	e, err := NewLocal(&o)
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// result is everything a finished process produced.
type result struct {
	Stdout, Stderr string
	Code           int
	Err            error
}

// collect reads both streams to the end and waits for the process, with
// a deadline after which the process group is killed and the test fails.
func collect(t *testing.T, p Process) result {
	t.Helper()
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(&out, p.Stdout()) }()
	go func() { defer wg.Done(); io.Copy(&errb, p.Stderr()) }()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(testTimeout):
		p.Signal(true)
		t.Fatalf("process %d: output did not end within %v", p.Pid(), testTimeout)
	}
	code, err := waitTimeout(t, p)
	return result{Stdout: out.String(), Stderr: errb.String(), Code: code, Err: err}
}

func waitTimeout(t *testing.T, p Process) (int, error) {
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
	case <-time.After(testTimeout):
		p.Signal(true)
		t.Fatalf("process %d did not exit within %v", p.Pid(), testTimeout)
		return 0, nil
	}
}

func waitDone(t *testing.T, p Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(testTimeout):
		t.Fatalf("process %d: Done not closed within %v", p.Pid(), testTimeout)
	}
}

// readPID reads one line holding a PID (a shell's "echo $!") from r.
func readPID(t *testing.T, r *bufio.Reader) int {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading pid line: %q, %v", line, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("pid line %q: %v", line, err)
	}
	return pid
}

// waitGone polls the process table until pid has died.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	proctest.WaitGone(t, testTimeout, pid)
}
