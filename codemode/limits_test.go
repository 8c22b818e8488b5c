package codemode_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment/envtest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
)

func TestRunCodeMemoryLimit(t *testing.T) {
	eachEnv(t, func(t *testing.T, env string) {
		needPython(t)
		tests := []struct {
			name, codemode string
			alloc          int64
			fail           bool
		}{
			{"256MiB allows 64MiB", `memory = "256MiB"`, 64 << 20, false},
			{"256MiB refuses 1GiB", `memory = "256MiB"`, 1 << 30, true},
			{"default 1GiB refuses 2GiB", "", 2 << 30, true},
			{"default 1GiB allows 256MiB", "", 256 << 20, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				a, _ := newApp(t, appOptions{env: env, codemode: tt.codemode})
				code := "b = bytearray(" + strconv.FormatInt(tt.alloc, 10) + ")\nprint('allocated', len(b) > 0)"
				res := runCode(t, context.Background(), a, nil, code, 30)
				if tt.fail {
					if res.Err == nil || !strings.Contains(res.Err.Message, "MemoryError") {
						t.Errorf("run_code = %q, %v; want a MemoryError", res.Text, res.Err)
					}
					return
				}
				if res.Err != nil || res.Text != "allocated True\n" {
					t.Errorf("run_code = %q, %v; want allocated", res.Text, res.Err)
				}
			})
		}
	})
}

// TestRunCodeNoSurvivors: a setsid daemon started from run_code is gone
// when the run ends, times out or is cancelled, on both environments.
func TestRunCodeNoSurvivors(t *testing.T) {
	eachEnv(t, func(t *testing.T, env string) {
		needPython(t)
		if env == "local" {
			envtest.RequireTreeTracking(t)
		}
		daemon := "import subprocess, os, time\n" +
			"subprocess.run(['setsid', '-f', 'flock', '-x', 'lock', 'sh', '-c', 'echo > lock.ready; exec sleep 1000'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)\n" +
			"while not os.path.exists('lock.ready'):\n    time.sleep(0.01)\n" +
			"print('daemon up', flush=True)\n"
		for _, tt := range []struct {
			name   string
			code   string
			cancel bool
		}{
			{"done", daemon, false},
			{"timeout", daemon + "time.sleep(60)", false},
			{"cancel", daemon + "time.sleep(60)", true},
		} {
			t.Run(tt.name, func(t *testing.T) {
				ws := t.TempDir()
				a, _ := newApp(t, appOptions{env: env, ws: ws})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				lock := filepath.Join(ws, "lock")
				if tt.cancel {
					go cancelOnFile(lock+".ready", cancel)
				}
				res := runCode(t, ctx, a, nil, tt.code, 2)
				switch tt.name {
				case "done":
					if res.Err != nil || res.Text != "daemon up\n" {
						t.Fatalf("run_code = %q, %v", res.Text, res.Err)
					}
				case "timeout":
					if res.Err == nil || !strings.Contains(res.Err.Message, "timed out") {
						t.Fatalf("run_code = %q, %v; want a timeout", res.Text, res.Err)
					}
				case "cancel":
					if res.Err == nil || !strings.Contains(res.Err.Message, "cancelled") {
						t.Fatalf("run_code = %q, %v; want a cancellation", res.Text, res.Err)
					}
				}
				if _, err := os.Stat(lock + ".ready"); err != nil {
					t.Fatalf("the daemon never started: %v", err)
				}
				envtest.WaitUnlocked(t, lock)
			})
		}
	})
}

// TestRunCodeSandboxed: code and its subprocesses see only the sandbox.
func TestRunCodeSandboxed(t *testing.T) {
	needPython(t)
	testenv.MustHaveBwrap(t)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(home, ".bub-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	f.WriteString("s3cret")
	f.Close()
	a, _ := newApp(t, appOptions{env: "sandbox"})
	code := "import subprocess, socket\n" +
		"for cmd in (['cat', " + quote(f.Name()) + "], ['sh', '-c', 'echo x > /usr/x']):\n" +
		"    print(subprocess.run(cmd, capture_output=True).returncode != 0)\n" +
		"try:\n    open(" + quote(f.Name()) + ").read()\n    print('read')\nexcept OSError:\n    print('hidden')\n" +
		"try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n    print('online')\nexcept OSError:\n    print('offline')\n"
	res := runCode(t, context.Background(), a, nil, code, 30)
	if res.Err != nil || res.Text != "True\nTrue\nhidden\noffline\n" {
		t.Errorf("run_code in the sandbox = %q, %v", res.Text, res.Err)
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "\\'") + "'" }

// cancelOnFile calls cancel once path exists (the code under test made it
// when it was ready to be cancelled), or after envtest.Timeout.
func cancelOnFile(path string, cancel context.CancelFunc) {
	deadline := time.Now().Add(envtest.Timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
}
