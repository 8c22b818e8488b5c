package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/codemode/pystub"
	"github.com/bubbuild/bub-mcp/internal/proctest"
	"github.com/google/go-cmp/cmp"
)

// testPython is the interpreter the tests run: $RUNNER_TEST_PYTHON, else
// python3's real executable, so that a version-manager shim does not slow
// every start.
var testPython = "python3"

func TestMain(m *testing.M) {
	if py := os.Getenv("RUNNER_TEST_PYTHON"); py != "" {
		testPython = py
		os.Exit(m.Run())
	}
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner tests need python3:", err)
		os.Exit(1)
	}
	if exe := strings.TrimSpace(string(out)); exe != "" {
		testPython = exe
	}
	os.Exit(m.Run())
}

func newTestRunner(t testing.TB, prestart bool) *Runner {
	t.Helper()
	r := New(&Options{Python: testPython, Prestart: prestart})
	t.Cleanup(func() { r.Close() })
	return r
}

// echoCall returns its arguments, fails for "deny", and serves a few
// special tools.
func echoCall(_ context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	switch name {
	case "deny":
		return nil, errors.New("[tool] not allowed")
	case "big":
		return json.Marshal(strings.Repeat("x", 200000))
	case "invalid":
		return json.RawMessage("{not json"), nil
	case "pretty":
		return json.RawMessage("{\n  \"a\": [1,\n 2]\n}\n"), nil
	}
	return args, nil
}

var (
	filenameRE  = regexp.MustCompile(`<run_code-[0-9a-f]{8}>`)
	caretLineRE = regexp.MustCompile(`(?m)^ *[~^]+ *\n`)
)

// normalize makes a traceback independent of the run's filename and of the
// Python version's caret lines.
func normalize(tb string) string {
	return caretLineRE.ReplaceAllString(filenameRE.ReplaceAllString(tb, "<run_code>"), "")
}

func TestRun(t *testing.T) {
	r := newTestRunner(t, false)
	tests := []struct {
		name      string
		code      string
		maxCalls  int
		maxOutput int
		want      string
		wantErr   *CodeError // Traceback "" means not compared
	}{
		{name: "print", code: "print(1)", want: "1\n"},
		{name: "no output", code: "x = 1", want: ""},
		{name: "unicode", code: "print('héllo ✓ 😀')", want: "héllo ✓ 😀\n"},
		{name: "stdin is empty", code: "import sys\nprint(repr(sys.stdin.read()))", want: "''\n"},
		{name: "await", code: "r = await tools.echo(a=1, b=[True, None])\nprint(r)", want: "{'a': 1, 'b': [True, None]}\n"},
		{name: "no await needed", code: "import asyncio\nprint(asyncio.run(tools.echo(a=2)))", want: "{'a': 2}\n"},
		{name: "dotted name", code: "print(await tools.mcp_search_docs(q='x'))\nprint(await getattr(tools, 'mcp.search-docs')(q='y'))", want: "{'q': 'x'}\n{'q': 'y'}\n"},
		{name: "call from a thread's loop", code: "import asyncio\nprint(await asyncio.to_thread(lambda: asyncio.run(tools.echo(t=1))))", want: "{'t': 1}\n"},
		{
			// The run's loop is blocked: the thread's reply must be read
			// by someone else than the loop's reader.
			name: "call from a thread while the loop is blocked",
			code: "import asyncio, threading\nout = []\nt = threading.Thread(target=lambda: out.append(asyncio.run(tools.echo(t=2))))\nt.start()\nt.join()\nprint(out, await tools.echo(t=3))",
			want: "[{'t': 2}] {'t': 3}\n",
		},
		{name: "sequential calls", code: "n = 0\nfor i in range(200):\n    n += (await tools.echo(i=i))['i']\nprint(n)", want: "19900\n"},
		{name: "gather", code: "import asyncio\nrs = await asyncio.gather(*(tools.echo(i=i) for i in range(10)))\nprint(sum(r['i'] for r in rs))", want: "45\n"},
		{
			name: "failed call caught",
			code: "try:\n    await tools.deny()\nexcept Exception as e:\n    print(type(e).__name__, e)",
			want: "BubError [tool] not allowed\n",
		},
		{
			name:    "failed call uncaught",
			code:    "print('before')\nawait tools.deny()",
			want:    "before\n",
			wantErr: &CodeError{Type: "BubError", Message: "[tool] not allowed", Traceback: "Traceback (most recent call last):\n  File \"<run_code>\", line 2, in <module>\n    await tools.deny()\nBubError: [tool] not allowed\n"},
		},
		{
			name:    "exception keeps user frames",
			code:    "print('so far')\ndef f():\n    raise ValueError('bad')\nf()",
			want:    "so far\n",
			wantErr: &CodeError{Type: "ValueError", Message: "bad", Traceback: "Traceback (most recent call last):\n  File \"<run_code>\", line 4, in <module>\n    f()\n  File \"<run_code>\", line 3, in f\n    raise ValueError('bad')\nValueError: bad\n"},
		},
		{
			name:    "syntax error",
			code:    "def (",
			wantErr: &CodeError{Type: "SyntaxError", Message: "invalid syntax (<run_code>, line 1)"},
		},
		{
			name:    "system exit",
			code:    "import sys\nprint('bye')\nsys.exit(3)",
			want:    "bye\n",
			wantErr: &CodeError{Type: "SystemExit", Message: "3"},
		},
		{
			name:    "positional arguments",
			code:    "await tools.echo(1)",
			wantErr: &CodeError{Type: "TypeError", Message: "tools.echo() accepts keyword arguments only"},
		},
		{
			name: "unknown tool",
			code: "await tools.nope()",
			wantErr: &CodeError{Type: "AttributeError", Message: "unknown tool 'nope'; the tools callable from code are: big, deny, echo, invalid, mcp_search_docs, pretty. " +
				"A tool offered to you directly (outside run_code) is not callable here: call it as a tool."},
		},
		{
			name:    "unknown tool near a known one",
			code:    "await tools.mcp_search_doc()",
			wantErr: &CodeError{Type: "AttributeError", Message: "unknown tool 'mcp_search_doc'; did you mean 'mcp_search_docs'?"},
		},
		{
			name:    "not serializable argument",
			code:    "await tools.echo(x=object())",
			wantErr: &CodeError{Type: "TypeError", Message: "tools.echo() arguments are not JSON serializable: Object of type object is not JSON serializable"},
		},
		{
			name: "not serializable argument caught",
			code: "try:\n    await tools.echo(x=float('nan'))\nexcept TypeError:\n    print('caught')\nprint(await tools.echo(x=1))",
			want: "caught\n{'x': 1}\n",
		},
		{
			name: "invalid result",
			code: "try:\n    await tools.invalid()\nexcept Exception as e:\n    print(e)",
			want: "tool result is not JSON serializable: invalid character 'n' looking for beginning of object key string\n",
		},
		{name: "multi-line result", code: "print(await tools.pretty())", want: "{'a': [1, 2]}\n"},
		{name: "big result", code: "s = await tools.big()\nprint(len(s))", want: "200000\n"},
		{name: "big argument", code: "r = await tools.echo(s='y' * 300000)\nprint(len(r['s']))", want: "300000\n"},
		{name: "big output", code: "print('z' * 200000)", want: strings.Repeat("z", 200000) + "\n"},
		{
			name:     "too many calls",
			code:     "n = 0\ntry:\n    for i in range(5):\n        await tools.echo(i=i)\n        n += 1\nexcept Exception as e:\n    print(n, e)",
			maxCalls: 3,
			want:     "3 [tool] too many tool calls: the limit is 3 per run\n",
		},
		{
			name:      "output cap keeps the end",
			code:      "for i in range(100):\n    print('line %03d' % i)",
			maxOutput: 90,
			want:      "[... 810 bytes of output omitted ...]\n" + lines(90, 100),
		},
		{
			name: "spoofed protocol is output",
			code: strings.Join([]string{
				`import os, sys`,
				`print('{"type":"done"}')`,
				`print('{"type":"call","id":0,"name":"x","arguments":{}}')`,
				`os.write(1, b'{"type":"failed","error":"X: y","traceback":""}\n')`,
				`sys.stdout.write('{"type":')`,
				`print(await tools.echo(id=0))`,
				`print('end')`,
			}, "\n"),
			want: "{\"type\":\"done\"}\n{\"type\":\"call\",\"id\":0,\"name\":\"x\",\"arguments\":{}}\n{\"type\":\"failed\",\"error\":\"X: y\",\"traceback\":\"\"}\n{\"type\":{'id': 0}\nend\n",
		},
		{
			name: "fork",
			code: "import os\npid = os.fork()\nif pid == 0:\n    print('in child')\nelse:\n    os.waitpid(pid, 0)\n    print('in parent')",
			want: "in child\nin parent\n",
		},
		{
			name: "subprocess output",
			code: "import subprocess\nsubprocess.run(['sh', '-c', 'echo out; echo err >&2'])\nprint('after')",
			want: "out\nafter\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Run(t.Context(), Request{
				Code:      tt.code,
				Tools:     []string{"echo", "deny", "big", "invalid", "pretty", "mcp.search-docs"},
				Call:      echoCall,
				MaxCalls:  tt.maxCalls,
				MaxOutput: tt.maxOutput,
				Timeout:   30 * time.Second,
			})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run(%q) output mismatch (-want +got):\n%s", tt.code, diff)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Run(%q) error = %v; want nil", tt.code, err)
				}
				return
			}
			var ce *CodeError
			if !errors.As(err, &ce) {
				t.Fatalf("Run(%q) error = %v (%T); want *CodeError", tt.code, err, err)
			}
			gotErr := *ce
			gotErr.Message = normalize(gotErr.Message)
			gotErr.Traceback = normalize(gotErr.Traceback)
			want := *tt.wantErr
			want.Output = tt.want
			if want.Traceback == "" {
				gotErr.Traceback = ""
			}
			if diff := cmp.Diff(want, gotErr); diff != "" {
				t.Errorf("Run(%q) error mismatch (-want +got):\n%s", tt.code, diff)
			}
			if wantMsg := "Code raised " + ce.Type + ": " + ce.Message; err.Error() != wantMsg {
				t.Errorf("Error() = %q; want %q", err.Error(), wantMsg)
			}
		})
	}
}

// TestIdentifierMatchesStub checks that code reaches every tool under the
// name the stub declares it with: the child must map names as
// pystub.Identifier does.
func TestIdentifierMatchesStub(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, false)
	names := []string{"orders_get", "mcp_search-docs", "2fa", "class", "None", "match", "type", "_", "café", "a b\tc", "\xff"}
	var code strings.Builder
	for _, n := range names {
		fmt.Fprintf(&code, "print(callable(getattr(tools, %q, None)))\n", pystub.Identifier(n))
	}
	out, err := r.Run(t.Context(), Request{Code: code.String(), Tools: names})
	if want := strings.Repeat("True\n", len(names)); err != nil || out != want {
		t.Errorf("Run(getattr(tools, pystub.Identifier(name))) = %q, %v; want %q", out, err, want)
	}
}

func lines(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "line %03d\n", i)
	}
	return b.String()
}

func TestSyntaxErrorTraceback(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, false)
	_, err := r.Run(t.Context(), Request{Code: "x = 1\ndef (\n"})
	var ce *CodeError
	if !errors.As(err, &ce) {
		t.Fatalf("Run error = %v; want *CodeError", err)
	}
	tb := normalize(ce.Traceback)
	for _, want := range []string{"File \"<run_code>\", line 2", "def (", "SyntaxError: invalid syntax"} {
		if !strings.Contains(tb, want) {
			t.Errorf("traceback %q does not contain %q", tb, want)
		}
	}
	if strings.Contains(tb, "child") || strings.Contains(tb, "<string>") {
		t.Errorf("traceback %q shows runner frames", tb)
	}
}

// TestGather100 checks that gathered calls reach Call concurrently: every
// call waits until all 100 have arrived.
func TestGather100(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, false)
	var arrived atomic.Int32
	all := make(chan struct{})
	call := func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		if arrived.Add(1) == 100 {
			close(all)
		}
		select {
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return args, nil
	}
	code := "import asyncio\nrs = await asyncio.gather(*(tools.echo(i=i) for i in range(100)))\nprint([r['i'] for r in rs] == list(range(100)))"
	got, err := r.Run(t.Context(), Request{Code: code, Tools: []string{"echo"}, Call: call, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got != "True\n" {
		t.Errorf("Run output = %q; want %q", got, "True\n")
	}
}

// orphanCode starts a shell with two background sleeps and a double-forked
// grandchild, records every pid in pidFile, prints "ready" and sleeps.
const orphanCode = `
import os, subprocess, time
PIDS = %q
def record(pid):
    with open(PIDS, 'a') as f:
        f.write('%%d\n' %% pid)
print('start')
record(os.getpid())
p = subprocess.Popen(['sh', '-c', 'sleep 1000 & echo $! >> "$0"; sleep 1000 & echo $! >> "$0"; wait', PIDS])
record(p.pid)
pid = os.fork()
if pid == 0:
    if os.fork() == 0:
        record(os.getpid())
        time.sleep(1000)
    os._exit(0)
os.waitpid(pid, 0)
while len(open(PIDS).read().split()) < 5:
    time.sleep(0.01)
print('ready')
time.sleep(1000)
`

func TestStopKillsEverything(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, true)
	tests := []struct {
		name    string
		timeout time.Duration
		cancel  bool
	}{
		{name: "timeout", timeout: 5 * time.Second},
		{name: "cancel", cancel: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "pids")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req := Request{Code: fmt.Sprintf(orphanCode, pidFile), Timeout: tt.timeout}
			if tt.cancel {
				req.Output = func(chunk string) {
					if strings.Contains(chunk, "ready") {
						cancel()
					}
				}
			}
			start := time.Now()
			out, err := r.Run(ctx, req)
			if out != "start\nready\n" {
				t.Errorf("Run output = %q; want %q", out, "start\nready\n")
			}
			if tt.cancel {
				var ce *CanceledError
				if !errors.As(err, &ce) || !errors.Is(err, context.Canceled) || ce.Output != out {
					t.Fatalf("Run error = %#v; want *CanceledError with output", err)
				}
			} else {
				var te *TimeoutError
				if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Run error = %#v; want *TimeoutError", err)
				}
				want := &TimeoutError{Timeout: tt.timeout, Output: out}
				if diff := cmp.Diff(want, te); diff != "" {
					t.Errorf("TimeoutError mismatch (-want +got):\n%s", diff)
				}
				if got, want := err.Error(), "Code timed out after 5 seconds"; got != want {
					t.Errorf("Error() = %q; want %q", got, want)
				}
			}
			if d := time.Since(start); d > tt.timeout+5*time.Second && !tt.cancel {
				t.Errorf("Run took %v", d)
			}
			data, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			pids := strings.Fields(string(data))
			if len(pids) != 5 {
				t.Fatalf("pid file has %q; want 5 pids", pids)
			}
			for _, s := range pids {
				pid, _ := strconv.Atoi(s)
				waitGone(t, pid)
			}
		})
	}
}

// waitGone fails unless pid is gone (or a zombie) within 5 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	proctest.WaitGone(t, 5*time.Second, pid)
}

func TestCallCanceledOnTimeout(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, true)
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	var started, returned atomic.Bool
	call := func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		started.Store(true)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond)
		returned.Store(true)
		return nil, ctx.Err()
	}
	_, err := r.Run(t.Context(), Request{Code: "print('x')\nawait tools.block()", Tools: []string{"block"}, Call: call, Timeout: 5 * time.Second})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Run error = %v; want *TimeoutError", err)
	}
	if !started.Load() {
		t.Fatal("the code timed out before it called the tool")
	}
	if te.Output != "x\n" {
		t.Errorf("Output = %q; want %q", te.Output, "x\n")
	}
	if !returned.Load() {
		t.Error("Run returned before Call did")
	}
}

func TestContextDeadline(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, false)
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	_, err := r.Run(ctx, Request{Code: "import time\ntime.sleep(100)"})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Run error = %v; want *TimeoutError", err)
	}
	if got, want := err.Error(), "Code timed out after 1.5 seconds"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
}

func TestCrash(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, false)
	tests := []struct {
		name         string
		code         string
		want         *CrashError
		ignoreStderr bool
	}{
		{
			name: "exit",
			code: "import os, sys, time\nprint('x')\nos.write(2, b'boom\\n')\ntime.sleep(0.5)\nos._exit(3)",
			want: &CrashError{Code: 3, Stderr: "boom\n", Output: "x\n"},
		},
		{
			name: "signal",
			code: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
			want: &CrashError{Code: -9},
		},
		{
			name:         "protocol closed",
			code:         "import os, time\nos.close(3)\nos.close(4)\ntime.sleep(100)",
			want:         &CrashError{Code: -9},
			ignoreStderr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := r.Run(t.Context(), Request{Code: tt.code, Timeout: 30 * time.Second})
			var ce *CrashError
			if !errors.As(err, &ce) {
				t.Fatalf("Run error = %v; want *CrashError", err)
			}
			got := *ce
			if tt.ignoreStderr {
				got.Stderr = ""
			}
			if diff := cmp.Diff(tt.want, &got); diff != "" {
				t.Errorf("CrashError mismatch (-want +got):\n%s", diff)
			}
			if want := fmt.Sprintf("Code runner exited unexpectedly with code %d", tt.want.Code); err.Error() != want {
				t.Errorf("Error() = %q; want %q", err.Error(), want)
			}
		})
	}
}

func TestOutputStreams(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, false)
	type chunk struct {
		at   time.Time
		data string
	}
	var chunks []chunk
	code := "import time\nfor i in range(5):\n    print(i)\n    time.sleep(0.3)"
	out, err := r.Run(t.Context(), Request{
		Code:    code,
		Output:  func(s string) { chunks = append(chunks, chunk{time.Now(), s}) },
		Timeout: 30 * time.Second,
	})
	end := time.Now()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var all strings.Builder
	for _, c := range chunks {
		all.WriteString(c.data)
	}
	if out != "0\n1\n2\n3\n4\n" || all.String() != out {
		t.Errorf("output = %q, chunks = %q; want both %q", out, all.String(), "0\n1\n2\n3\n4\n")
	}
	if len(chunks) < 3 {
		t.Fatalf("got %d chunks; want one per print", len(chunks))
	}
	if d := end.Sub(chunks[0].at); d < 900*time.Millisecond {
		t.Errorf("first chunk arrived %v before the end; want it streamed", d)
	}
}

func TestPrestart(t *testing.T) {
	r := newTestRunner(t, true)
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	var pids []string
	for range 3 {
		out, err := r.Run(t.Context(), Request{Code: "import os\nprint(os.getpid())"})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		pids = append(pids, strings.TrimSpace(out))
	}
	if pids[0] == pids[1] || pids[1] == pids[2] || pids[0] == pids[2] {
		t.Errorf("pids = %v; want a fresh process per run", pids)
	}
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	spare := r.spares[0].proc.(envProcess).Pid()
	r.mu.Unlock()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, spare)
	if _, err := r.Run(t.Context(), Request{Code: "print(1)"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close error = %v; want ErrClosed", err)
	}
}

func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, true)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := fmt.Sprintf("print(await tools.echo(n=%d))", i)
			out, err := r.Run(t.Context(), Request{Code: code, Tools: []string{"echo"}, Call: echoCall, Timeout: 30 * time.Second})
			if want := fmt.Sprintf("{'n': %d}\n", i); err != nil || out != want {
				t.Errorf("Run(%q) = %q, %v; want %q", code, out, err, want)
			}
		}()
	}
	wg.Wait()
}

func TestStartError(t *testing.T) {
	r := New(&Options{Python: "/nonexistent/python3"})
	defer r.Close()
	_, err := r.Run(t.Context(), Request{Code: "print(1)"})
	if err == nil || !strings.HasPrefix(err.Error(), "runner: start /nonexistent/python3:") {
		t.Errorf("Run error = %v; want a start error", err)
	}
}

func TestTailBuffer(t *testing.T) {
	tests := []struct {
		max    int
		writes []string
		want   string
	}{
		{max: 10, writes: []string{"abc", "def"}, want: "abcdef"},
		{max: 4, writes: []string{"abc", "def"}, want: "[... 2 bytes of output omitted ...]\ncdef"},
		{max: 3, writes: []string{"aaaaaaaaaa", "bbbbbbbbbbbbbbb", "cd"}, want: "[... 24 bytes of output omitted ...]\nbcd"},
		// "é" is two bytes: keeping 3 bytes would start mid-character.
		{max: 3, writes: []string{"aéé"}, want: "[... 3 bytes of output omitted ...]\né"},
	}
	for _, tt := range tests {
		b := tailBuffer{max: tt.max}
		for _, w := range tt.writes {
			b.WriteString(w)
		}
		if got := b.String(); got != tt.want {
			t.Errorf("tailBuffer{max: %d} after %q = %q; want %q", tt.max, tt.writes, got, tt.want)
		}
	}
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("a", 200<<10)
	lr := newLineReader(strings.NewReader("one\n" + long + "\n\ntail"))
	var got []string
	for {
		line, err := lr.next()
		if len(line) > 0 {
			got = append(got, string(line))
		}
		if err != nil {
			break
		}
	}
	want := []string{"one\n", long + "\n", "\n", "tail"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
}

func TestParseMessage(t *testing.T) {
	tests := []struct {
		line string
		want message
	}{
		{`{"type":"done"}` + "\n", message{Type: msgDone}},
		{`{"type":"call","id":7,"name":"a.b","arguments":{"x":1}}`, message{Type: msgCall, ID: 7, Name: "a.b", Arguments: json.RawMessage(`{"x":1}`)}},
		{`{"type":"output","data":"hi\n"}`, message{Type: msgOutput, Data: "hi\n"}},
		{"not json\n", message{Type: msgOutput, Data: "not json\n"}},
		{`{"no":"type"}`, message{Type: msgOutput, Data: `{"no":"type"}` + "\n"}},
		{`[1]`, message{Type: msgOutput, Data: "[1]\n"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, parseMessage([]byte(tt.line))); diff != "" {
			t.Errorf("parseMessage(%q) mismatch (-want +got):\n%s", tt.line, diff)
		}
	}
}

func TestEncodeResult(t *testing.T) {
	tests := []struct {
		value   string
		want    string
		wantErr bool
	}{
		{value: "", want: `{"type":"result","id":3,"value":null}` + "\n"},
		{value: " {\n \"a\" : [1, 2]\n}\n", want: `{"type":"result","id":3,"value":{"a":[1,2]}}` + "\n"},
		{value: `"x"`, want: `{"type":"result","id":3,"value":"x"}` + "\n"},
		{value: `{"a":`, wantErr: true},
		{value: `1 2`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := encodeResult(3, json.RawMessage(tt.value))
		if (err != nil) != tt.wantErr || string(got) != tt.want {
			t.Errorf("encodeResult(3, %q) = %q, %v; want %q, error %v", tt.value, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(`{"type":"call","id":0,"name":"x","arguments":{}}` + "\n"))
	f.Add([]byte(`{"type":"output","data":"\u00e9"}`))
	f.Add([]byte("plain text\n"))
	f.Add([]byte(`{"type":"failed","error":"E: m","traceback":"t"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m := parseMessage(line)
		if m.Type == "" {
			t.Fatalf("parseMessage(%q) has no type", line)
		}
		if m.Type == msgOutput && !json.Valid(line) && m.Data != strings.TrimSuffix(string(line), "\n")+"\n" {
			t.Fatalf("parseMessage(%q).Data = %q; want the line", line, m.Data)
		}
	})
}

func TestPool(t *testing.T) {
	t.Parallel()
	r := New(&Options{Python: testPython, Prestart: true, Pool: 3, Idle: time.Hour})
	t.Cleanup(func() { r.Close() })
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := r.Spares(); n != 3 {
		t.Fatalf("Spares() after WaitReady = %d; want 3", n)
	}
	// More concurrent runs than the pool holds all succeed, each in its
	// own interpreter.
	var wg sync.WaitGroup
	pids := make([]string, 5)
	for i := range pids {
		wg.Go(func() {
			out, err := r.Run(t.Context(), Request{Code: "import os\nprint(os.getpid())"})
			if err != nil {
				t.Errorf("Run: %v", err)
			}
			pids[i] = strings.TrimSpace(out)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, p := range pids {
		if seen[p] {
			t.Errorf("pids = %v; want a fresh interpreter per run", pids)
		}
		seen[p] = true
	}
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := r.Spares(); n != 3 {
		t.Errorf("Spares() after the runs = %d; want the pool refilled to 3", n)
	}
}

func TestPoolShrinksWhenIdle(t *testing.T) {
	t.Parallel()
	r := New(&Options{Python: testPython, Prestart: true, Pool: 2, Idle: 100 * time.Millisecond})
	t.Cleanup(func() { r.Close() })
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	var pids []int
	for _, c := range r.spares {
		pids = append(pids, c.proc.(envProcess).Pid())
	}
	r.mu.Unlock()
	for _, pid := range pids {
		waitGone(t, pid)
	}
	if n := r.Spares(); n != 0 {
		t.Errorf("Spares() when idle = %d; want 0", n)
	}
	// The next run starts what it needs again.
	if out, err := r.Run(t.Context(), Request{Code: "print(1)"}); err != nil || out != "1\n" {
		t.Errorf("Run after shrinking = %q, %v", out, err)
	}
}

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	r := New(&Options{Python: testPython, Memory: 256 << 20})
	t.Cleanup(func() { r.Close() })
	out, err := r.Run(t.Context(), Request{Code: "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS))\nb = bytearray(1 << 30)"})
	var ce *CodeError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "MemoryError") || !strings.HasPrefix(out, "(268435456, 268435456)") {
		t.Errorf("Run = %q, %v; want the limit shown and a MemoryError", out, err)
	}
}

// TestForgedProtocol: code that writes to the private protocol descriptor
// can end or confuse its own run, and nothing else: a forged "done" ends
// the run early, a forged call is checked like a real one, and an endless
// line is cut off at MaxLine instead of growing the host's memory.
func TestForgedProtocol(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, false)
	tests := []struct {
		name, code string
		check      func(out string, err error) bool
	}{
		{"forged done ends the run", "import __main__, os\nos.write(__main__._POUT, b'{\"type\":\"done\"}\\n')\nimport time; time.sleep(30)\nprint('never')",
			func(out string, err error) bool { return err == nil && out == "" }},
		{"forged call to an unknown tool", "import __main__, os, time\nos.write(__main__._POUT, b'{\"type\":\"call\",\"id\":99,\"name\":\"secret\",\"arguments\":{}}\\n')\ntime.sleep(0.2)\nprint('ok')",
			func(out string, err error) bool { return err == nil && out == "ok\n" }},
		{"endless line", "import __main__, os\nchunk = b'x' * (1 << 20)\nfor _ in range(64):\n    os.write(__main__._POUT, chunk)\nimport time; time.sleep(30)",
			func(out string, err error) bool {
				var ce *CrashError
				return errors.As(err, &ce) && strings.Contains(ce.Stderr, "protocol line over 32 MiB")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			out, err := r.Run(t.Context(), Request{Code: tt.code, Tools: []string{"echo"}, Call: func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
				calls.Add(1)
				return args, nil
			}})
			if !tt.check(out, err) {
				t.Errorf("Run = %q, %v", out, err)
			}
			if calls.Load() != 0 {
				t.Errorf("a forged call reached Call %d times", calls.Load())
			}
		})
	}
}
