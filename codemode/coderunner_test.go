package codemode_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/google/go-cmp/cmp"
)

// Test environments: "test-coderunner" runs run_code itself
// (environment.CodeRunner), "test-spawnonly" does not and falls back to
// code mode's runner over Spawn. Both are the host underneath.
func init() {
	environment.Register("test-coderunner", func(ctx context.Context, o environment.Options) (environment.Environment, error) {
		local, err := environment.NewLocal(&environment.LocalOptions{Workspace: o.Workspace, Python: o.Python})
		if err != nil {
			return nil, err
		}
		return &runnerEnv{spawnOnly: spawnOnly{local}}, nil
	})
	environment.Register("test-spawnonly", func(ctx context.Context, o environment.Options) (environment.Environment, error) {
		local, err := environment.NewLocal(&environment.LocalOptions{Workspace: o.Workspace, Python: o.Python})
		if err != nil {
			return nil, err
		}
		return spawnOnly{local}, nil
	})
}

// spawnOnly is an Environment with nothing but the interface's methods:
// no CodeRunner, no fork server, no Python hint.
type spawnOnly struct{ l *environment.LocalEnvironment }

func (e spawnOnly) Workspace() string                    { return e.l.Workspace() }
func (e spawnOnly) ResolvePath(p string) (string, error) { return e.l.ResolvePath(p) }
func (e spawnOnly) Spawn(ctx context.Context, s environment.Spec) (environment.Process, error) {
	return e.l.Spawn(ctx, s)
}
func (e spawnOnly) ReadText(ctx context.Context, p string) (string, error) {
	return e.l.ReadText(ctx, p)
}
func (e spawnOnly) WriteText(ctx context.Context, p, c string) error { return e.l.WriteText(ctx, p, c) }
func (e spawnOnly) Close() error                                     { return e.l.Close() }

// runnerEnv runs "code" with a scripted interpreter of its own, one
// command a line: "print X", "call NAME ARGS" (prints the JSON result or
// the error), "raise MSG" and "wait" (until the context ends).
type runnerEnv struct {
	spawnOnly
	mu    sync.Mutex
	codes []string
	tools []string
}

func (e *runnerEnv) RunCode(ctx context.Context, req environment.CodeRequest) error {
	e.mu.Lock()
	e.codes = append(e.codes, req.Code)
	e.tools = req.Tools
	e.mu.Unlock()
	for _, line := range strings.Split(req.Code, "\n") {
		cmd, rest, _ := strings.Cut(line, " ")
		switch cmd {
		case "print":
			req.Write(rest + "\n")
		case "call":
			name, args, _ := strings.Cut(rest, " ")
			v, err := req.CallTool(ctx, name, json.RawMessage(args))
			if err != nil {
				req.Write("error: " + err.Error() + "\n")
				continue
			}
			req.Write(string(v) + "\n")
		case "raise":
			return &environment.CodeFailed{Message: "ValueError: " + rest, Traceback: "Traceback: ValueError: " + rest}
		case "wait":
			<-ctx.Done()
			return ctx.Err()
		}
	}
	return nil
}

// TestEnvironmentCodeRunner checks that run_code goes through the
// session environment's own RunCode when it has one (the seed's
// Environment.run_code), with the host keeping the tool list, the hooks,
// the timeout and Bub's messages; and that an environment without one
// gets code mode's runner over its Spawn.
func TestEnvironmentCodeRunner(t *testing.T) {
	needPython(t)
	log := &hookLog{}
	a, _ := newApp(t, appOptions{env: "test-coderunner", reg: testRegistry(t, log)})
	tests := []struct {
		name    string
		code    string
		timeout int
		want    string
		wantErr string
		details map[string]any
	}{
		{name: "print", code: "print hello", want: "hello\n"},
		{name: "nested call through the hooks", code: `call orders_get {"order_id":"7"}`, want: `{"id":"7","status":"shipped"}` + "\n"},
		{name: "denied by a hook", code: `call orders_cancel {"order_id":"7"}`, want: "error: [tool] not allowed\n"},
		{name: "not a code tool", code: `call fs_read {"path":"x"}`, want: "error: [tool] unknown tool \"fs_read\"\n"},
		{name: "result JSON cannot carry", code: "call nan {}", want: "error: tool result is not JSON serializable: unsupported value: NaN\n"},
		{name: "code raised", code: "print before\nraise bad input", wantErr: "[tool] Code raised ValueError: bad input",
			details: map[string]any{"output": "before\n", "traceback": "Traceback: ValueError: bad input"}},
		{name: "timeout", code: "print started\nwait", timeout: 1, wantErr: "[tool] Code timed out after 1 seconds (pass a larger timeout_seconds, at most 600, or do less in one run)",
			details: map[string]any{"output": "started\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCode(t, context.Background(), a, nil, tt.code, tt.timeout)
			if tt.wantErr != "" {
				if res.Err == nil || res.Err.Error() != tt.wantErr {
					t.Fatalf("run_code = %q, %v; want %s", res.Text, res.Err, tt.wantErr)
				}
				if diff := cmp.Diff(tt.details, res.Err.Details); diff != "" {
					t.Errorf("details (-want +got):\n%s", diff)
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("run_code: %v", res.Err)
			}
			if diff := cmp.Diff(tt.want, res.Text); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
	if n := log.count("orders_get code_mode=true"); n != 1 {
		t.Errorf("hooks saw the nested orders_get %d times; want 1 (log %v)", n, log.lines)
	}
	conn, _ := resolve(t, a, "default")
	env, err := a.Environment(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	re, ok := env.(*runnerEnv)
	if !ok {
		t.Fatalf("environment is %T; want *runnerEnv", env)
	}
	re.mu.Lock()
	defer re.mu.Unlock()
	if len(re.codes) != len(tests) {
		t.Errorf("RunCode ran %d times; want %d", len(re.codes), len(tests))
	}
	if !containsAll(re.tools, "orders_get", "orders_cancel", "nan") || containsAll(re.tools, "fs_read") {
		t.Errorf("RunCode got tools %v; want the View's code tools", re.tools)
	}
}

// TestEnvironmentWithoutCodeRunner checks the fallback: an environment
// that has only Spawn runs run_code through code mode's own runner.
func TestEnvironmentWithoutCodeRunner(t *testing.T) {
	needPython(t)
	a, _ := newApp(t, appOptions{env: "test-spawnonly"})
	res := runCode(t, context.Background(), a, nil, "import sys\no = await tools.orders_get(order_id='7')\nprint(o['status'], sys.version_info[0])", 0)
	if res.Err != nil {
		t.Fatalf("run_code: %v %v", res.Err, res.Err.Details)
	}
	if res.Text != "shipped 3\n" {
		t.Errorf("run_code = %q; want %q", res.Text, "shipped 3\n")
	}
	res = runCode(t, context.Background(), a, nil, "raise ValueError('x')", 0)
	if res.Err == nil || res.Err.Error() != "[tool] Code raised ValueError: x" {
		t.Errorf("run_code = %v; want Code raised ValueError: x", res.Err)
	}
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}
