package codemode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/proctest"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// needPython skips a test that needs python3 where it is missing, except
// in CI (CI=true), where a missing dependency must fail the run.
func needPython(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 not installed")
		}
		t.Skip("python3 not installed")
	}
}

// hookLog records what hooks saw: "name code_mode=bool".
type hookLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *hookLog) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

func (l *hookLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, x := range l.lines {
		if x == s {
			n++
		}
	}
	return n
}

// testRegistry is providerRegistry plus tools that misbehave, a policy
// hook denying orders.cancel and a hook recording every call.
func testRegistry(t testing.TB, log *hookLog) *registry.Registry {
	t.Helper()
	reg := providerRegistry(t)
	reg.MustRegister(registry.MustNewTool("orders.cancel", "Cancel an order.",
		func(ctx context.Context, tc *registry.ToolContext, in orderIn) (string, error) {
			return "cancelled", nil
		}))
	reg.MustRegister(rawTool(t, "echo", func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return args, nil
	}))
	reg.MustRegister(rawTool(t, "big", func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return strings.Repeat("x", 200000), nil
	}))
	reg.MustRegister(rawTool(t, "nan", func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return map[string]any{"v": math.NaN()}, nil
	}))
	reg.MustRegister(rawTool(t, "rendered_nan", func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return map[string]any{"v": math.NaN()}, nil
	}, registry.WithRenderer(func(v map[string]any) string { return "v is not a number" })))
	reg.MustRegister(rawTool(t, "chan", func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return make(chan int), nil
	}))
	reg.MustRegister(rawTool(t, "broken", func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return nil, registry.NewError(registry.KindTemporary, "try again later", nil)
	}))
	reg.AddHooks(registry.Hooks{Name: "policy", Before: func(ctx context.Context, call *registry.ToolCall) registry.Decision {
		if call.Name == "orders_cancel" {
			return registry.Deny("not allowed")
		}
		return registry.Proceed()
	}})
	if log != nil {
		reg.AddHooks(registry.Hooks{Name: "record", Before: func(ctx context.Context, call *registry.ToolCall) registry.Decision {
			log.add(fmt.Sprintf("%s code_mode=%v", call.Name, call.Context.CodeMode))
			return registry.Proceed()
		}})
	}
	return reg
}

// runCode calls run_code from the default profile's View.
func runCode(t testing.TB, ctx context.Context, a *app.App, peer registry.Peer, code string, timeout int) registry.Result {
	t.Helper()
	conn, v := resolve(t, a, "default")
	if _, ok := v.Lookup("run_code"); !ok {
		t.Fatalf("run_code not in the View: %v", names(v.Tools))
	}
	in := map[string]any{"code": code}
	if timeout > 0 {
		in["timeout_seconds"] = timeout
	}
	return a.Call(ctx, conn, app.Request{Tool: "run_code", Args: args(t, in), Peer: peer})
}

// progressPeer records progress notifications.
type progressPeer struct {
	mu       sync.Mutex
	messages []string
	values   []float64
}

func (p *progressPeer) Progress(ctx context.Context, progress, total float64, message string) {
	p.mu.Lock()
	p.messages = append(p.messages, message)
	p.values = append(p.values, progress)
	p.mu.Unlock()
}
func (p *progressPeer) Log(context.Context, slog.Level, string, any) {}
func (p *progressPeer) Sample(context.Context, registry.SampleRequest) (*registry.SampleResult, error) {
	return nil, registry.ErrNoPeer
}
func (p *progressPeer) Elicit(context.Context, registry.ElicitRequest) (*registry.ElicitResult, error) {
	return nil, registry.ErrNoPeer
}

func TestRunCode(t *testing.T) { eachEnv(t, testRunCode) }

func testRunCode(t *testing.T, env string) {
	needPython(t)
	log := &hookLog{}
	a, _ := newApp(t, appOptions{reg: testRegistry(t, log), env: env})
	tests := []struct {
		name    string
		code    string
		timeout int
		want    string            // output on success
		wantErr string            // "[kind] message" on failure
		details map[string]string // substrings expected in details
	}{
		{name: "print", code: "print(1)", want: "1\n"},
		{name: "structured result", code: "o = await tools.orders_get(order_id='7')\nprint(o['id'], o['status'])", want: "7 shipped\n"},
		{name: "echo", code: "print(await tools.echo(a=[1, 'x', None], b={'c': True}))", want: "{'a': [1, 'x', None], 'b': {'c': True}}\n"},
		{name: "gather 100", code: "import asyncio\n" +
			"rs = await asyncio.gather(*(tools.orders_get(order_id=str(i)) for i in range(100)))\n" +
			"print(len(rs), sorted(int(r['id']) for r in rs) == list(range(100)))", want: "100 True\n"},
		{name: "deny caught", code: "try:\n    await tools.orders_cancel(order_id='1')\nexcept Exception as e:\n    print(type(e).__name__, e)",
			want: "BubError [tool] not allowed\n"},
		{name: "deny uncaught", code: "await tools.orders_cancel(order_id='1')", wantErr: "[tool] Code raised BubError: [tool] not allowed",
			details: map[string]string{"traceback": "BubError"}},
		{name: "tool error kind", code: "try:\n    await tools.broken()\nexcept Exception as e:\n    print(e)", want: "[temporary] try again later\n"},
		{name: "invalid arguments", code: "try:\n    await tools.orders_get(order_id=5)\nexcept Exception as e:\n    print(str(e).split(' ')[0])", want: "[invalid_input]\n"},
		{name: "preserved tool is unknown", code: "try:\n    await tools.fs_read(path='x')\nexcept AttributeError as e:\n    print(e)", want: "unknown tool 'fs_read'; the tools callable from code are: big, broken, chan, echo, nan, orders_cancel, orders_get, rendered_nan, web_fetch. A tool offered to you directly (outside run_code) is not callable here: call it as a tool.\n"},
		{name: "run_code is unknown", code: "try:\n    await tools.run_code(code='print(1)')\nexcept AttributeError as e:\n    print(e)", want: "unknown tool 'run_code'; the tools callable from code are: big, broken, chan, echo, nan, orders_cancel, orders_get, rendered_nan, web_fetch. A tool offered to you directly (outside run_code) is not callable here: call it as a tool.\n"},
		{name: "command is unknown", code: "try:\n    await tools.code_mode(enable=False)\nexcept AttributeError as e:\n    print(e)", want: "unknown tool 'code_mode'; the tools callable from code are: big, broken, chan, echo, nan, orders_cancel, orders_get, rendered_nan, web_fetch. A tool offered to you directly (outside run_code) is not callable here: call it as a tool.\n"},
		{name: "near miss", code: "try:\n    await tools.order_get(order_id='1')\nexcept AttributeError as e:\n    print(e)", want: "unknown tool 'order_get'; did you mean 'orders_get'?\n"},
		{name: "positional arguments", code: "try:\n    await tools.orders_get('1')\nexcept TypeError as e:\n    print(e)", want: "tools.orders_get() accepts keyword arguments only\n"},
		{name: "big result", code: "r = await tools.big()\nprint(len(r), r[:3])", want: "200000 xxx\n"},
		// A value JSON cannot carry raises in the code, as in Bub (a
		// renderer does not apply: nested results are not rendered).
		{name: "NaN result caught", code: "try:\n    await tools.nan()\nexcept Exception as e:\n    print(type(e).__name__, e)",
			want: "BubError tool result is not JSON serializable: unsupported value: NaN\n"},
		{name: "channel result caught", code: "try:\n    await tools.chan()\nexcept Exception as e:\n    print(e)",
			want: "tool result is not JSON serializable: unsupported type: chan int\n"},
		{name: "renderer does not apply", code: "try:\n    await tools.rendered_nan()\nexcept Exception as e:\n    print(e)",
			want: "tool result is not JSON serializable: unsupported value: NaN\n"},
		{name: "NaN result uncaught", code: "print('before')\nawait tools.nan()\nprint('after')",
			wantErr: "[tool] Code raised BubError: tool result is not JSON serializable: unsupported value: NaN",
			details: map[string]string{"output": "before\n"}},
		{name: "protocol spoofing is inert", code: "import os, sys\nprint('{\"type\":\"done\"}')\nsys.stdout.flush()\n" +
			"os.write(1, b'{\"type\":\"failed\",\"error\":\"X: y\"}\\n')\nprint('after')",
			want: "{\"type\":\"done\"}\n{\"type\":\"failed\",\"error\":\"X: y\"}\nafter\n"},
		{name: "raise", code: "print('checking')\nraise ValueError('bad input')", wantErr: "[tool] Code raised ValueError: bad input",
			details: map[string]string{"output": "checking\n", "traceback": "ValueError: bad input"}},
		{name: "syntax error", code: "def (", wantErr: "[tool] Code raised SyntaxError: "},
		{name: "exit", code: "import sys\nsys.exit(3)", wantErr: "[tool] Code raised SystemExit: 3"},
		{name: "crash", code: "import os, sys\nprint('before', flush=True)\nos.write(2, b'dying\\n')\nimport time; time.sleep(0.3)\nos._exit(7)",
			wantErr: "[tool] Code runner exited unexpectedly with code 7", details: map[string]string{"stderr": "dying", "output": "before\n"}},
		{name: "timeout", code: "import time\nprint('started', flush=True)\ntime.sleep(30)", timeout: 1,
			wantErr: "[tool] Code timed out after 1 seconds (pass a larger timeout_seconds, at most 600, or do less in one run)", details: map[string]string{"output": "started\n"}},
		{name: "timeout above max", code: "print(1)", timeout: 601, wantErr: "[invalid_input] timeout_seconds must be between 1 and 600."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCode(t, context.Background(), a, nil, tt.code, tt.timeout)
			if tt.wantErr == "" {
				if res.Err != nil {
					t.Fatalf("run_code error: %v %v", res.Err, res.Err.Details)
				}
				if diff := cmp.Diff(tt.want, res.Text); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
				return
			}
			if res.Err == nil {
				t.Fatalf("run_code = %q; want error %q", res.Text, tt.wantErr)
			}
			if got := res.Err.Error(); !strings.HasPrefix(got, tt.wantErr) {
				t.Errorf("error = %q; want %q", got, tt.wantErr)
			}
			for k, want := range tt.details {
				got, _ := res.Err.Details[k].(string)
				if !strings.Contains(got, want) {
					t.Errorf("details[%q] = %q; want it to contain %q", k, got, want)
				}
			}
		})
	}

	// Hooks saw the gathered calls as code-mode calls, and run_code itself
	// as a direct one.
	if n := log.count("orders_get code_mode=true"); n < 101 {
		t.Errorf("hooks saw %d code-mode orders_get calls; want at least 101", n)
	}
	if n := log.count("orders_get code_mode=false"); n != 0 {
		t.Errorf("hooks saw %d direct orders_get calls; want 0", n)
	}
	if n := log.count("run_code code_mode=false"); n != len(tests) {
		t.Errorf("hooks saw run_code %d times; want %d", n, len(tests))
	}
}

func TestRunCodeSpillsItsOwnOutput(t *testing.T) {
	needPython(t)
	a, _ := newApp(t, appOptions{})
	res := runCode(t, context.Background(), a, nil, "print(await tools.big())", 0)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if !strings.HasPrefix(res.Text, "[tool output spilled: 200,001 bytes") {
		t.Errorf("output not spilled: %.200q", res.Text)
	}
}

func TestRunCodeNotEnabled(t *testing.T) {
	needPython(t)
	a, _ := newApp(t, appOptions{})
	for _, profile := range []string{"direct", "restricted"} {
		t.Run(profile, func(t *testing.T) {
			conn, v := resolve(t, a, profile)
			if _, ok := v.Lookup("run_code"); ok {
				t.Fatalf("run_code listed for %s", profile)
			}
			if _, ok := v.Lookup("orders_get"); !ok {
				t.Errorf("orders_get not direct for %s: %v", profile, names(v.Tools))
			}
			res := command(a, conn, "run_code", args(t, map[string]any{"code": "print(1)"}))
			if res.Err == nil || res.Err.Error() != "[invalid_input] Code mode is not enabled for this run." {
				t.Errorf("run_code = %q, %v; want [invalid_input] Code mode is not enabled for this run.", res.Text, res.Err)
			}
		})
	}
}

func TestRunCodeMaxCalls(t *testing.T) {
	needPython(t)
	a, _ := newApp(t, appOptions{codemode: "max_calls = 5"})
	code := "import asyncio\nrs = await asyncio.gather(*(tools.echo(i=i) for i in range(6)), return_exceptions=True)\n" +
		"print(sum(isinstance(r, dict) for r in rs), [str(r) for r in rs if not isinstance(r, dict)])"
	res := runCode(t, context.Background(), a, nil, code, 0)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if want := "5 ['[tool] too many tool calls: the limit is 5 per run']\n"; res.Text != want {
		t.Errorf("output = %q; want %q", res.Text, want)
	}
}

func TestRunCodeStreamsProgress(t *testing.T) {
	needPython(t)
	a, _ := newApp(t, appOptions{})
	peer := &progressPeer{}
	code := "import asyncio\nprint('one')\nawait asyncio.sleep(0.4)\nawait tools.echo(x=1)\nprint('two')"
	res := runCode(t, context.Background(), a, peer, code, 0)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if got := strings.Join(peer.messages, ""); got != res.Text || len(peer.messages) < 2 {
		t.Errorf("progress messages %q; want the output %q in at least 2 chunks", peer.messages, res.Text)
	}
	for i := 1; i < len(peer.values); i++ {
		if peer.values[i] <= peer.values[i-1] {
			t.Errorf("progress does not grow: %v", peer.values)
		}
	}
}

func TestCodeModeSwitchPersists(t *testing.T) {
	needPython(t)
	home, ws := t.TempDir(), t.TempDir()
	reg := testRegistry(t, nil)
	a, _ := newApp(t, appOptions{home: home, ws: ws, reg: reg})
	conn, v := resolve(t, a, "direct")
	if _, ok := v.Lookup("run_code"); ok {
		t.Fatal("run_code listed before the switch")
	}
	res := command(a, conn, "code_mode", json.RawMessage(`{"enable":"true"}`))
	if res.Err != nil || res.Text != "Session code mode enabled (applies from the next turn)." {
		t.Fatalf("code_mode enable=true = %q, %v", res.Text, res.Err)
	}
	// The connection resolved before the switch keeps its View until the
	// next turn.
	if v, _ := a.View(context.Background(), conn); len(v.CodeTools) != 0 {
		t.Error("the switch changed the View of the turn in progress")
	}
	_, v = resolve(t, a, "direct")
	if _, ok := v.Lookup("run_code"); !ok || len(v.CodeTools) == 0 {
		t.Errorf("after the switch: tools %v, code tools %v", names(v.Tools), names(v.CodeTools))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	a2, _ := newApp(t, appOptions{home: home, ws: ws, reg: reg})
	conn, v = resolve(t, a2, "direct")
	if !conn.CodeMode || len(v.CodeTools) == 0 {
		t.Fatalf("after a restart: code mode %v, code tools %v", conn.CodeMode, names(v.CodeTools))
	}
	res = runCode(t, context.Background(), a2, nil, "print('on')", 0)
	if res.Err != nil || res.Text != "on\n" {
		t.Errorf("run_code after restart = %q, %v", res.Text, res.Err)
	}
	res = command(a2, conn, "code_mode", json.RawMessage(`{"enable":"false"}`))
	if res.Err != nil || res.Text != "Session code mode disabled (applies from the next turn)." {
		t.Fatalf("code_mode enable=false = %q, %v", res.Text, res.Err)
	}
	_, v = resolve(t, a2, "direct")
	if _, ok := v.Lookup("run_code"); ok || len(v.CodeTools) != 0 {
		t.Errorf("after disabling: tools %v, code tools %v", names(v.Tools), names(v.CodeTools))
	}
}

func TestPythonMissing(t *testing.T) {
	a, _ := newApp(t, appOptions{codemode: `python = "no-such-python-3"`})
	conn, v := resolve(t, a, "default")
	if _, ok := v.Lookup("run_code"); ok {
		t.Errorf("run_code offered without Python: %v", names(v.Tools))
	}
	if _, ok := v.Lookup("orders_get"); !ok {
		t.Errorf("code mode did not fall back to direct tools: %v", names(v.Tools))
	}
	res := command(a, conn, "run_code", args(t, map[string]any{"code": "print(1)"}))
	want := `[config] Python was not found ("no-such-python-3" is not on PATH): install Python 3, or set [codemode] python in bub.toml to the interpreter's path.`
	if res.Err == nil || res.Err.Error() != want {
		t.Errorf("run_code = %q, %v; want %s", res.Text, res.Err, want)
	}
}

// TestCodeModeSwitchWithoutPython checks that turning code mode on where
// no interpreter was found says run_code will not be offered and why,
// instead of enabling it silently; turning it off says nothing more.
func TestCodeModeSwitchWithoutPython(t *testing.T) {
	tests := []struct {
		name, python string
		enable       bool
		want         string
	}{
		{"enable without Python", "no-such-python-3", true, "Session code mode enabled (applies from the next turn).\n" +
			`run_code will not be offered: Python was not found ("no-such-python-3" is not on PATH), so the tools stay direct. ` +
			"Install Python 3, or set [codemode] python in bub.toml to the interpreter's path."},
		{"disable without Python", "no-such-python-3", false, "Session code mode disabled (applies from the next turn)."},
		{"enable with Python", "python3", true, "Session code mode enabled (applies from the next turn)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.python == "python3" {
				needPython(t)
			}
			a, _ := newApp(t, appOptions{codemode: "python = \"" + tt.python + "\""})
			conn, _ := resolve(t, a, "direct")
			res := command(a, conn, "code_mode", args(t, map[string]any{"enable": tt.enable}))
			if res.Err != nil {
				t.Fatalf("code_mode: %v", res.Err)
			}
			if diff := cmp.Diff(tt.want, res.Text); diff != "" {
				t.Errorf("code_mode (-want +got):\n%s", diff)
			}
			// The switch is recorded either way.
			conn, _ = resolve(t, a, "direct")
			if conn.CodeMode != tt.enable {
				t.Errorf("session code mode = %v; want %v", conn.CodeMode, tt.enable)
			}
		})
	}
}

func TestStubReadableWhenConfined(t *testing.T) {
	needPython(t)
	home := t.TempDir()
	a, _ := newApp(t, appOptions{home: home})
	conn, v := resolve(t, a, "confined")
	content, path, ok, err := codemode.ViewStub(home, conn, v)
	if err != nil || !ok {
		t.Fatalf("ViewStub: %v, %v", ok, err)
	}
	if !strings.Contains(v.Instructions, path) {
		t.Errorf("instructions do not name %s", path)
	}
	env, err := a.Environment(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.ReadText(context.Background(), path)
	if err != nil || got != content {
		t.Errorf("ReadText(stub) = %d chars, %v; want the stub", len(got), err)
	}
	// The rest of $BUB_HOME (tapes) stays out of reach.
	tape := filepath.Join(home, "tapes", "other.jsonl")
	if err := os.WriteFile(tape, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := env.ReadText(context.Background(), tape); !errors.Is(err, environment.ErrOutsideWorkspace) {
		t.Errorf("ReadText(%s) = %v; want ErrOutsideWorkspace", tape, err)
	}
}

// TestStubDirNotWritableWhenConfined checks that a confined profile's
// file tools cannot write into $BUB_HOME/codemode: the stub directory is
// readable for the model, but a file planted there (or a rewritten stub)
// would be Python that code mode later runs.
func TestStubDirNotWritableWhenConfined(t *testing.T) {
	needPython(t)
	home := t.TempDir()
	a, _ := newApp(t, appOptions{home: home, reg: registry.New(), modules: []string{"builtin", "codemode"}})
	conn, v := resolve(t, a, "confined")
	content, stub, ok, err := codemode.ViewStub(home, conn, v)
	if err != nil || !ok {
		t.Fatalf("ViewStub: %v, %v", ok, err)
	}
	tests := []struct {
		name, tool string
		args       map[string]any
	}{
		{name: "plant a file", tool: "fs_write", args: map[string]any{"path": filepath.Join(home, "codemode", "planted.py"), "content": "import os"}},
		{name: "plant in a session directory", tool: "fs_write", args: map[string]any{"path": filepath.Join(filepath.Dir(stub), "sitecustomize.py"), "content": "import os"}},
		{name: "rewrite the stub", tool: "fs_write", args: map[string]any{"path": stub, "content": "import os"}},
		{name: "edit the stub", tool: "fs_edit", args: map[string]any{"path": stub, "old": "async def", "new": "def"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := a.Call(context.Background(), conn, app.Request{Tool: tt.tool, Args: args(t, tt.args)})
			if res.Err == nil || !strings.Contains(res.Err.Error(), "is read-only") {
				t.Errorf("%s = %q, %v; want a read-only error", tt.tool, res.Text, res.Err)
			}
		})
	}
	for _, p := range []string{filepath.Join(home, "codemode", "planted.py"), filepath.Join(filepath.Dir(stub), "sitecustomize.py")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was planted (stat: %v)", p, err)
		}
	}
	if b, err := os.ReadFile(stub); err != nil || string(b) != content {
		t.Errorf("the stub changed: %v", err)
	}
	// Reading it still works, and so does writing in the workspace.
	if res := a.Call(context.Background(), conn, app.Request{Tool: "fs_read", Args: args(t, map[string]any{"path": stub})}); res.Err != nil {
		t.Errorf("fs.read(stub): %v", res.Err)
	}
	if res := a.Call(context.Background(), conn, app.Request{Tool: "fs_write", Args: args(t, map[string]any{"path": "ok.txt", "content": "x"})}); res.Err != nil {
		t.Errorf("fs.write(ok.txt): %v", res.Err)
	}
}

// TestRunCodeKillsTheTree checks that after a timeout, a cancellation and
// a normal end no process the code started is left.
func TestRunCodeKillsTheTree(t *testing.T) {
	needPython(t)
	a, _ := newApp(t, appOptions{})
	code := "import subprocess, os, time\n" +
		"p = subprocess.Popen(['sh', '-c', 'sleep 300 & echo $!; wait'], stdout=subprocess.PIPE, text=True)\n" +
		"print('pids', os.getpid(), p.pid, p.stdout.readline().strip(), flush=True)\n"
	tests := []struct {
		name   string
		code   string
		cancel bool
	}{
		{name: "timeout", code: code + "time.sleep(60)"},
		{name: "cancel", code: code + "time.sleep(60)", cancel: true},
		{name: "done", code: code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			peer := &progressPeer{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				go func() {
					deadline := time.Now().Add(10 * time.Second)
					for time.Now().Before(deadline) {
						peer.mu.Lock()
						line := strings.Contains(strings.Join(peer.messages, ""), "\n")
						peer.mu.Unlock()
						if line {
							break
						}
						time.Sleep(10 * time.Millisecond)
					}
					cancel()
				}()
			}
			res := runCode(t, ctx, a, peer, tt.code, 2)
			peer.mu.Lock()
			out := strings.Join(peer.messages, "")
			peer.mu.Unlock()
			var pids []int
			for _, f := range strings.Fields(strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "pids ")) {
				if n, err := strconv.Atoi(f); err == nil {
					pids = append(pids, n)
				}
			}
			if len(pids) != 3 {
				t.Fatalf("output %q (result %q, %v): want three pids", out, res.Text, res.Err)
			}
			switch {
			case tt.cancel && (res.Err == nil || !strings.Contains(res.Err.Message, "cancelled")):
				t.Errorf("cancelled run_code = %q, %v", res.Text, res.Err)
			case tt.name == "timeout" && (res.Err == nil || !strings.HasPrefix(res.Err.Message, "Code timed out after 2 seconds (")):
				t.Errorf("timed-out run_code = %q, %v", res.Text, res.Err)
			}
			waitGone(t, pids)
		})
	}
}

// waitGone polls the process table until every pid has exited.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	proctest.WaitGone(t, 5*time.Second, pids...)
}

func TestRunCodeMaxTimeout(t *testing.T) {
	needPython(t)
	a, _ := newApp(t, appOptions{codemode: "max_timeout_seconds = 30"})
	res := runCode(t, context.Background(), a, nil, "print(1)", 31)
	if want := "[invalid_input] timeout_seconds must be between 1 and 30."; res.Err == nil || res.Err.Error() != want {
		t.Errorf("run_code(timeout_seconds=31) = %q, %v; want %s", res.Text, res.Err, want)
	}
	if res := runCode(t, context.Background(), a, nil, "print(1)", 30); res.Err != nil || res.Text != "1\n" {
		t.Errorf("run_code(timeout_seconds=30) = %q, %v", res.Text, res.Err)
	}
}

// waitRunners polls until m keeps want runners.
func waitRunners(t *testing.T, m *codemode.Module, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for m.Runners() != want {
		if time.Now().After(deadline) {
			t.Fatalf("module keeps %d runners; want %d", m.Runners(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunnerReleasedWhenEnvironmentCloses(t *testing.T) {
	needPython(t)
	a, m := newApp(t, appOptions{})
	run := func() *providers.Connection {
		t.Helper()
		conn, _ := resolve(t, a, "default")
		if res := runCode(t, context.Background(), a, nil, "print(1)", 0); res.Err != nil || res.Text != "1\n" {
			t.Fatalf("run_code = %q, %v", res.Text, res.Err)
		}
		return conn
	}
	conn := run()
	run() // the same environment keeps its runner
	if n := m.Runners(); n != 1 {
		t.Fatalf("module keeps %d runners after two runs in one environment; want 1", n)
	}
	a.Forget(conn) // closes the session's environment
	waitRunners(t, m, 0)
	run() // a new environment gets a new runner
	waitRunners(t, m, 1)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitRunners(t, m, 0)
}

// plainEnv hides LocalEnvironment's Closed: it stands for an Environment
// that does not announce its end.
type plainEnv struct{ environment.Environment }

// oddEnv cannot key a map.
type oddEnv struct {
	environment.Environment
	_ []int
}

func init() {
	local := func(o environment.Options) (environment.Environment, error) {
		return environment.NewLocal(&environment.LocalOptions{Workspace: o.Workspace, Confine: o.Confine, AllowPaths: o.AllowPaths, Python: o.Python})
	}
	environment.Register("codemode-test-plain", func(ctx context.Context, o environment.Options) (environment.Environment, error) {
		env, err := local(o)
		return plainEnv{env}, err
	})
	environment.Register("codemode-test-odd", func(ctx context.Context, o environment.Options) (environment.Environment, error) {
		env, err := local(o)
		return oddEnv{Environment: env}, err
	})
}

// TestRunnersOfOtherEnvironments checks that a runner of an Environment
// that does not announce its end is released at Cleanup, and that one
// that cannot be a map key gets a runner per run, kept nowhere.
func TestRunnersOfOtherEnvironments(t *testing.T) {
	needPython(t)
	profiles := "[profiles.plain]\ncode_mode = true\nenvironment = \"codemode-test-plain\"\n" +
		"[profiles.odd]\ncode_mode = true\nenvironment = \"codemode-test-odd\"\n"
	a, m := newApp(t, appOptions{profiles: profiles})
	run := func(profile string) *providers.Connection {
		t.Helper()
		conn, _ := resolve(t, a, profile)
		res := a.Call(context.Background(), conn, app.Request{Tool: "run_code", Args: json.RawMessage(`{"code":"print(await tools.echo(x=1))"}`)})
		if res.Err != nil || res.Text != "{'x': 1}\n" {
			t.Fatalf("%s: run_code = %q, %v", profile, res.Text, res.Err)
		}
		return conn
	}
	run("odd")
	run("odd")
	if n := m.Runners(); n != 0 {
		t.Errorf("module keeps %d runners for an environment that cannot key a map; want 0", n)
	}
	conn := run("plain")
	a.Forget(conn)
	run("plain")
	if n := m.Runners(); n != 2 {
		t.Errorf("module keeps %d runners; want 2 (the closed environment's is only known at Cleanup)", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := m.Runners(); n != 0 {
		t.Errorf("module keeps %d runners after Close; want 0", n)
	}
}
