package codemode_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/environment"
)

// TestEnvironmentDoesNotWaitForPython: a session's first call of any tool
// makes its Environment, and that no longer waits for the interpreter to
// say where it lives (through a version manager's shim, 40-150 ms).
// The interpreter here is a script that answers only once a gate file
// exists: echo answers with the gate shut, the Environment runs the
// command as configured until the answer comes, and run_code asks for
// it, so its runs start the real executable.
func TestEnvironmentDoesNotWaitForPython(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	py := filepath.Join(dir, "gated-python")
	script := "#!/bin/sh\nwhile [ ! -e " + gate + " ]; do sleep 0.01; done\nexec python3 \"$@\"\n"
	if err := os.WriteFile(py, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	a, _ := newApp(t, appOptions{codemode: `python = "` + py + `"`})
	conn, _ := resolve(t, a, "default")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o644) }) // never leave a script waiting

	done := make(chan app.Request, 1)
	go func() {
		req := app.Request{Tool: "echo", Mode: app.Command, Args: json.RawMessage(`{"x":1}`)} // a comma command: code mode does not hide it
		if res := a.Call(context.Background(), conn, req); res.Err != nil {
			t.Errorf("echo: %v", res.Err)
		}
		done <- req
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a call that needs no Python waited for the interpreter's answer")
	}
	env, err := a.Environment(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if got := environment.PythonOf(env); got != py {
		t.Errorf("Environment made before the answer runs %q, want the command as configured, %q", got, py)
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := a.Call(context.Background(), conn, app.Request{Tool: "run_code", Args: json.RawMessage(`{"code":"import sys; print(sys.executable)"}`)})
	if res.Err != nil {
		t.Fatalf("run_code: %v", res.Err)
	}
	exe, err := environment.ResolvePython(py)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != exe+"\n" || exe == py {
		t.Errorf("run_code ran %q, want the interpreter's own executable %q", res.Text, exe)
	}
}
