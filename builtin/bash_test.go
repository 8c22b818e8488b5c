package builtin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/proctest"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

func TestBash(t *testing.T) { eachEnv(t, testBash) }

func testBash(t *testing.T, f *fixture) {
	if err := os.Mkdir(f.ws+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"echo", map[string]any{"command": "echo hello"}, "hello"},
		{"stripped", map[string]any{"command": "printf '\\n  hi  \\n\\n'"}, "hi"},
		{"no output", map[string]any{"command": "true"}, "(no output)"},
		{"stderr merged", map[string]any{"command": "echo oops >&2"}, "oops"},
		{"stdin is at EOF", map[string]any{"command": "cat"}, "(no output)"},
		{"cwd relative", map[string]any{"command": "basename \"$PWD\"", "cwd": "sub"}, "sub"},
		{"cwd null", map[string]any{"command": "pwd", "cwd": nil}, f.ws},
		{"invalid UTF-8 replaced", map[string]any{"command": "printf 'a\\377b'"}, "a\uFFFDb"},
		{"UTF-8 kept", map[string]any{"command": "printf 'h\\303\\251llo'"}, "héllo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := f.ok("bash", tt.args); got != tt.want {
				t.Errorf("bash(%v) = %q; want %q", tt.args, got, tt.want)
			}
		})
	}
	if n := f.mod.shells.count(f.env); n != 0 {
		t.Errorf("finished foreground shells still registered: %d", n)
	}
}

func TestBashFailures(t *testing.T) { eachEnv(t, testBashFailures) }

func testBashFailures(t *testing.T, f *fixture) {
	if err := os.WriteFile(filepath.Join(f.ws, "file.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    map[string]any
		kind    registry.Kind
		message string // exact, or a prefix when it ends in "..."
		details map[string]any
	}{
		{"exit code", map[string]any{"command": "echo out; exit 7"}, registry.KindTool,
			"command exited with code 7\noutput:\nout", map[string]any{"exit_code": 7, "output": "out\n"}},
		{"exit code no output", map[string]any{"command": "exit 3"}, registry.KindTool,
			"command exited with code 3\noutput:\n(no output)", map[string]any{"exit_code": 3, "output": ""}},
		{"command not found", map[string]any{"command": "no-such-command-xyz"}, registry.KindTool,
			"command exited with code 127\noutput:\n...", nil},
		{"empty command", map[string]any{"command": "  "}, registry.KindInvalidInput, "`command` must not be empty.", nil},
		{"missing cwd", map[string]any{"command": "true", "cwd": "nope"}, registry.KindNotFound, "working directory " + f.ws + "/nope does not exist", nil},
		{"cwd is a file", map[string]any{"command": "true", "cwd": "file.txt"}, registry.KindInvalidInput, "working directory " + f.ws + "/file.txt is not a directory", nil},
		{"missing command arg", map[string]any{}, registry.KindInvalidInput, "Tool 'bash' argument validation failed.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := f.fails("bash", tt.args)
			if e.Kind != tt.kind {
				t.Errorf("kind = %s; want %s (%v)", e.Kind, tt.kind, e)
			}
			if p, ok := strings.CutSuffix(tt.message, "..."); ok {
				if !strings.HasPrefix(e.Message, p) {
					t.Errorf("message = %q; want prefix %q", e.Message, p)
				}
			} else if e.Message != tt.message {
				t.Errorf("message = %q; want %q", e.Message, tt.message)
			}
			if tt.details != nil {
				if diff := cmp.Diff(tt.details, e.Details); diff != "" {
					t.Errorf("details (-want +got):\n%s", diff)
				}
			}
		})
	}
	e := f.fails("bash", map[string]any{"command": "no-such-command-xyz"})
	if !strings.Contains(e.Message, "not found") || e.Details["hint"] == nil || e.Details["exit_code"] != 127 {
		t.Errorf("command not found: %q %v; want the shell's 'not found' and a hint", e.Message, e.Details)
	}
}

func TestBashWithoutEnvironment(t *testing.T) {
	exec := newExec(t, &Module{})
	res := exec.Call(t.Context(), registry.Call{Tool: "bash", Args: []byte(`{"command":"true"}`)})
	if res.Err == nil || res.Err.Kind != registry.KindConfig {
		t.Fatalf("bash without environment = %+v; want a config error", res)
	}
}

var shellIDRE = regexp.MustCompile(`^bash-[0-9a-f]{8}$`)

func TestBackgroundShellOutputAndKill(t *testing.T) {
	f := newFixture(t, nil)
	text := f.ok("bash", map[string]any{"command": "echo $$; sleep 300 & echo $!; sleep 300 & echo $!; wait", "background": true})
	id := shellID(t, text)
	if !shellIDRE.MatchString(id) {
		t.Fatalf("shell id %q does not look like bash-<8hex>", id)
	}
	if want := "Shell started, shell_id: " + id + "\nRetrieve the output with bash_output or terminate it with bash_kill."; text != want {
		t.Errorf("bash background = %q; want %q", text, want)
	}
	pids := f.pollOutput(id, 3)
	out := f.ok("bash.output", map[string]any{"shell_id": id})
	if want := "id: " + id + "\nstatus: running\nexit_code: null\nnext_offset: "; !strings.HasPrefix(out, want) {
		t.Errorf("bash.output = %q; want prefix %q", out, want)
	}

	got := f.ok("bash.kill", map[string]any{"shell_id": id})
	if want := "id: " + id + "\nstatus: exited\nexit_code: -15"; got != want {
		t.Errorf("bash.kill = %q; want %q", got, want)
	}
	waitGone(t, atoi(t, pids[0]), atoi(t, pids[1]), atoi(t, pids[2]))

	// bash.kill again is harmless; the first read after exit reaps.
	if got := f.ok("bash.kill", map[string]any{"shell_id": id}); !strings.HasSuffix(got, "exit_code: -15") {
		t.Errorf("second bash.kill = %q", got)
	}
	out = f.ok("bash.output", map[string]any{"shell_id": id})
	if want := "id: " + id + "\nstatus: exited\nexit_code: -15\nnext_offset: "; !strings.HasPrefix(out, want) {
		t.Errorf("bash.output after kill = %q; want prefix %q", out, want)
	}
	e := f.fails("bash.output", map[string]any{"shell_id": id})
	if e.Kind != registry.KindNotFound || e.Message != "unknown shell id: "+id {
		t.Errorf("bash.output after reap = %v; want [not_found] unknown shell id", e)
	}
}

func TestBashKillReachesChildrenIgnoringTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 3 s SIGTERM grace period")
	}
	f := newFixture(t, nil)
	// The shell and its children ignore SIGTERM; only SIGKILL ends them.
	id := shellID(t, f.ok("bash", map[string]any{"command": "trap '' TERM; echo $$; sleep 300 & echo $!; wait", "background": true}))
	pids := f.pollOutput(id, 2)
	start := time.Now()
	got := f.ok("bash.kill", map[string]any{"shell_id": id})
	if want := "exit_code: -9"; !strings.HasSuffix(got, want) {
		t.Errorf("bash.kill = %q; want suffix %q", got, want)
	}
	if d := time.Since(start); d < KillGrace {
		t.Errorf("bash.kill took %v; want the %v grace period first", d, KillGrace)
	}
	waitGone(t, atoi(t, pids[0]), atoi(t, pids[1]))
}

func TestEnvironmentCloseEndsShells(t *testing.T) {
	f := newFixture(t, nil)
	id := shellID(t, f.ok("bash", map[string]any{"command": "echo $$; sleep 300 & echo $!; sleep 300 & echo $!; wait", "background": true}))
	pids := f.pollOutput(id, 3)
	if err := f.env.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitGone(t, atoi(t, pids[0]), atoi(t, pids[1]), atoi(t, pids[2]))
	// The shell table forgets a closed environment once its shells end.
	deadline := time.Now().Add(testTimeout)
	for f.mod.shells.count(f.env) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("closed environment still holds %d shells", f.mod.shells.count(f.env))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if e := f.fails("bash", map[string]any{"command": "true"}); e.Kind != registry.KindConfig || !strings.Contains(e.Message, "shell runtime is closed") {
		t.Errorf("bash after Close = %v; want [config] ... shell runtime is closed", e)
	}
}

func TestBashTimeoutContinuesInBackground(t *testing.T) {
	f := newFixture(t, nil)
	res := f.call("bash", map[string]any{"command": "echo $$; sleep 300 & echo $!; wait", "timeout_seconds": 1})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	id := shellID(t, res.Text)
	if want := "command timed out after 1 seconds; continuing in background\nshell_id: " + id; res.Text != want {
		t.Errorf("bash timeout = %q; want %q", res.Text, want)
	}
	r := res.Value.(BashResult)
	if !r.TimedOut || r.Status != "running" || r.ExitCode != nil {
		t.Errorf("timeout result = %+v", r)
	}
	pids := f.pollOutput(id, 2)
	for _, p := range pids {
		if proctest.Gone(atoi(t, p)) {
			t.Fatalf("process %s died at the timeout; it should keep running", p)
		}
	}
	f.ok("bash.kill", map[string]any{"shell_id": id})
	waitGone(t, atoi(t, pids[0]), atoi(t, pids[1]))
}

func TestBashCancelKillsProcessGroup(t *testing.T) {
	f := newFixture(t, nil)
	pidfile := f.ws + "/pids"
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan registry.Result, 1)
	go func() {
		done <- f.callCtx(ctx, "bash", map[string]any{"command": "sleep 300 & echo $! > pids.tmp; echo $$ >> pids.tmp; mv pids.tmp pids; wait"})
	}()
	var pids []string
	deadline := time.Now().Add(testTimeout)
	for {
		if b, err := os.ReadFile(pidfile); err == nil {
			pids = strings.Fields(string(b))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command did not write its pids")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	var res registry.Result
	select {
	case res = <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("bash did not return promptly after cancellation")
	}
	if res.Err == nil || !strings.Contains(res.Err.Message, "cancelled") {
		t.Errorf("cancelled bash = %+v; want a cancellation error", res)
	}
	waitGone(t, atoi(t, pids[0]), atoi(t, pids[1]))
	if n := f.mod.shells.count(f.env); n != 0 {
		t.Errorf("cancelled shell still registered (%d)", n)
	}
}

func TestBashStreamsProgress(t *testing.T) { eachEnv(t, testBashStreamsProgress) }

func testBashStreamsProgress(t *testing.T, f *fixture) {
	peer := &recordingPeer{}
	f.peer = peer
	got := f.ok("bash", map[string]any{"command": "for i in 1 2 3 4; do echo line$i; sleep 0.15; done"})
	if got != "line1\nline2\nline3\nline4" {
		t.Errorf("bash = %q", got)
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if len(peer.messages) < 2 {
		t.Fatalf("progress messages = %q; want the output streamed in several", peer.messages)
	}
	if !strings.Contains(strings.Join(peer.messages, ""), "line1") {
		t.Errorf("progress messages %q do not carry the output", peer.messages)
	}
	if peer.last <= 0 {
		t.Errorf("progress = %v; want bytes so far", peer.last)
	}
}

func TestBashOutputPaging(t *testing.T) {
	f := newFixture(t, nil)
	id := shellID(t, f.ok("bash", map[string]any{"command": "printf 'abcdef\\n'", "background": true}))
	tests := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"offset": 2, "limit": 2}, "status: exited\nexit_code: 0\nnext_offset: 4\noutput:\ncd"},
		{map[string]any{"offset": 0, "limit": 0}, "status: exited\nexit_code: 0\nnext_offset: 0\noutput:\n(no output)"},
		{map[string]any{"offset": 100}, "status: exited\nexit_code: 0\nnext_offset: 7\noutput:\n(no output)"},
	}
	// Wait until the shell finished: the reads above must not reap it,
	// since none reaches the end... except the last, which does.
	deadline := time.Now().Add(testTimeout)
	for {
		sh, err := f.mod.shells.get(f.env, id)
		if err != nil {
			t.Fatal(err)
		}
		if sh.finished() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("shell did not finish")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, tt := range tests {
		tt.args["shell_id"] = id
		if got := f.ok("bash.output", tt.args); got != "id: "+id+"\n"+tt.want {
			t.Errorf("bash.output(%v) = %q; want %q", tt.args, got, tt.want)
		}
	}
	if e := f.fails("bash.output", map[string]any{"shell_id": id}); e.Kind != registry.KindNotFound {
		t.Errorf("read after reaching the end reaped nothing: %v", e)
	}
	for _, args := range []map[string]any{
		{"shell_id": "bash-00000000"},
		{"shell_id": id, "offset": -1},
		{"shell_id": id, "limit": -5},
	} {
		if e := f.fails("bash.output", args); e.Kind != registry.KindNotFound {
			t.Errorf("bash.output(%v) = %v; want not_found", args, e)
		}
	}
	if e := f.fails("bash.kill", map[string]any{"shell_id": "bash-deadbeef"}); e.Message != "unknown shell id: bash-deadbeef" {
		t.Errorf("bash.kill unknown = %v", e)
	}
}

func TestBashOutputCap(t *testing.T) {
	f := newFixture(t, nil)
	const n = 3 * DefaultOutputCap
	id := shellID(t, f.ok("bash", map[string]any{"command": "head -c " + strconv.Itoa(n) + " /dev/zero | tr '\\0' a; echo END", "background": true}))
	var r BashOutputResult
	deadline := time.Now().Add(testTimeout)
	for {
		res := f.call("bash.output", map[string]any{"shell_id": id, "offset": 0, "limit": 40})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		r = res.Value.(BashOutputResult)
		if r.Status == "exited" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("shell did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !regexp.MustCompile(`^\[\.\.\. \d+ bytes dropped \.\.\.\]\naaa`).MatchString(r.Output) {
		t.Errorf("output from offset 0 = %q; want the dropped marker then the oldest kept output", r.Output)
	}
	tail := f.ok("bash.output", map[string]any{"shell_id": id, "offset": n - 3})
	if want := "next_offset: " + strconv.Itoa(n+4) + "\noutput:\naaaEND"; !strings.HasSuffix(tail, want) {
		t.Errorf("tail = %q; want suffix %q (offsets count dropped output)", tail, want)
	}
	sh, err := f.mod.shells.get(f.env, id)
	if err == nil {
		t.Errorf("shell %s still registered after reading to the end", sh.id)
	}
}

// BenchmarkBashTrue is a foreground bash round trip of `true` through the
// executor; compare with BenchmarkExecBashTrue.
func BenchmarkBashTrue(b *testing.B) {
	env, err := environment.NewLocal(&environment.LocalOptions{Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	m := &Module{}
	defer m.Cleanup()
	exec := newExec(b, m)
	tc := &registry.ToolContext{Env: env}
	b.ReportAllocs()
	for b.Loop() {
		res := exec.Call(b.Context(), registry.Call{Tool: "bash", Args: []byte(`{"command":"true"}`), Context: tc})
		if res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

// BenchmarkExecBashTrue runs `bash -c true` with os/exec directly: the
// baseline for BenchmarkBashTrue.
func BenchmarkExecBashTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Command("bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
