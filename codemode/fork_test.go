package codemode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/environment/envtest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	_ "github.com/bubbuild/bub-mcp/sandbox" // [profiles.<name>.sandbox]
)

// forkedApp is an App whose one connection's runs are forked from a fork
// server: the first run makes the environment and its runner, and the
// fork server is waited for.
type forkedApp struct {
	a    *app.App
	m    *codemode.Module
	conn *providers.Connection
}

func newForkedApp(t *testing.T, o appOptions) *forkedApp {
	t.Helper()
	needPython(t)
	a, m := newApp(t, o)
	conn, _ := resolve(t, a, "default")
	f := &forkedApp{a: a, m: m, conn: conn}
	if res := f.run(context.Background(), t, "print(1)", 30); res.Err != nil || res.Text != "1\n" {
		t.Fatalf("first run_code = %q, %v", res.Text, res.Err)
	}
	if err := m.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := m.Forking(); n != 1 {
		t.Fatalf("Forking() = %d after WaitReady; want the runner's fork server up", n)
	}
	return f
}

func (f *forkedApp) run(ctx context.Context, t testing.TB, code string, timeout int) registry.Result {
	t.Helper()
	in := map[string]any{"code": code, "timeout_seconds": timeout}
	return f.a.Call(ctx, f.conn, app.Request{Tool: "run_code", Args: args(t, in)})
}

// TestForkedRuns: runs forked from the fork server behave as started ones,
// with the same limits, on both environments.
func TestForkedRuns(t *testing.T) {
	eachEnv(t, func(t *testing.T, env string) {
		f := newForkedApp(t, appOptions{env: env, codemode: `memory = "256MiB"`})
		t.Run("concurrent", func(t *testing.T) {
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					code := "import asyncio\nr = await tools.orders_get(order_id='" + strconv.Itoa(i) + "')\nprint(r['id'])"
					if res := f.run(context.Background(), t, code, 30); res.Err != nil || res.Text != strconv.Itoa(i)+"\n" {
						t.Errorf("run %d = %q, %v", i, res.Text, res.Err)
					}
				})
			}
			wg.Wait()
		})
		t.Run("memory limit", func(t *testing.T) {
			res := f.run(context.Background(), t, "b = bytearray(1 << 30)", 30)
			if res.Err == nil || !strings.Contains(res.Err.Message, "MemoryError") {
				t.Errorf("1 GiB under 256MiB = %q, %v; want a MemoryError", res.Text, res.Err)
			}
			if res := f.run(context.Background(), t, "b = bytearray(64 << 20)\nprint(len(b))", 30); res.Err != nil {
				t.Errorf("64 MiB under 256MiB = %q, %v", res.Text, res.Err)
			}
		})
		t.Run("fresh interpreter", func(t *testing.T) {
			if res := f.run(context.Background(), t, "import builtins\nbuiltins.leak = 1\nprint('set')", 30); res.Err != nil {
				t.Fatal(res.Err)
			}
			res := f.run(context.Background(), t, "import builtins, sys\nprint(hasattr(builtins, 'leak'), 'ast' in sys.modules)", 30)
			if res.Err != nil || res.Text != "False True\n" {
				t.Errorf("second run = %q, %v; want no state from the first, imports done", res.Text, res.Err)
			}
		})
		t.Run("own session", func(t *testing.T) {
			res := f.run(context.Background(), t, "import os\nprint(os.getsid(0) == os.getpid() == os.getpgid(0))", 30)
			if res.Err != nil || res.Text != "True\n" {
				t.Errorf("run = %q, %v; want the interpreter to lead its session", res.Text, res.Err)
			}
		})
		if f.m.Forking() != 1 {
			t.Errorf("Forking() = %d after the runs; want the fork server still up", f.m.Forking())
		}
	})
}

// TestForkedNoSurvivors: a setsid daemon started from a forked run is
// gone when the run ends, times out or is cancelled.
func TestForkedNoSurvivors(t *testing.T) {
	eachEnv(t, func(t *testing.T, env string) {
		if env == "local" {
			envtest.RequireTreeTracking(t)
		}
		ws := t.TempDir()
		f := newForkedApp(t, appOptions{env: env, ws: ws})
		daemon := "import subprocess, os, time\n" +
			"subprocess.run(['setsid', '-f', 'flock', '-x', 'lock', 'sh', '-c', 'echo > lock.ready; exec sleep 1000'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)\n" +
			"while not os.path.exists('lock.ready'):\n    time.sleep(0.01)\n" +
			"print('daemon up', flush=True)\n"
		lock := filepath.Join(ws, "lock")
		for _, tt := range []struct {
			name, code, want string
			cancel           bool
		}{
			{"done", daemon, "", false},
			{"timeout", daemon + "time.sleep(60)", "timed out", false},
			{"cancel", daemon + "time.sleep(60)", "cancelled", true},
		} {
			t.Run(tt.name, func(t *testing.T) {
				os.Remove(lock + ".ready")
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.cancel {
					go cancelOnFile(lock+".ready", cancel)
				}
				res := f.run(ctx, t, tt.code, 2)
				if tt.want == "" && (res.Err != nil || res.Text != "daemon up\n") {
					t.Fatalf("run_code = %q, %v", res.Text, res.Err)
				}
				if tt.want != "" && (res.Err == nil || !strings.Contains(res.Err.Message, tt.want)) {
					t.Fatalf("run_code = %q, %v; want %q", res.Text, res.Err, tt.want)
				}
				if _, err := os.Stat(lock + ".ready"); err != nil {
					t.Fatalf("the daemon never started: %v", err)
				}
				envtest.WaitUnlocked(t, lock)
			})
		}
	})
}

// TestForkedSandboxIsolation: a run forked in the sandbox is held as a
// spawned process is: its own pid namespace with its own /proc, no
// capabilities, only loopback, and no sight of another run's processes.
func TestForkedSandboxIsolation(t *testing.T) {
	testenv.MustHaveBwrap(t)
	ws := t.TempDir()
	f := newForkedApp(t, appOptions{env: "sandbox", ws: ws})
	code := "import os, socket\n" +
		"caps = {l.split(':')[0]: l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')}\n" +
		"print(sorted(set(caps.values())))\n" +
		"print(os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n" +
		"s = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nsocket.create_connection(s.getsockname(), timeout=2)\nprint('loopback')\n" +
		"try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n    print('online')\nexcept OSError:\n    print('offline')\n" +
		"print(open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0])\n"
	res := f.run(context.Background(), t, code, 30)
	want := "['0000000000000000']\n2 [1, 2]\nloopback\noffline\n1\n"
	if res.Err != nil || res.Text != want {
		t.Errorf("forked run in the sandbox = %q, %v; want %q", res.Text, res.Err, want)
	}

	// Each run is pid 2 of a pid namespace of its own (numbering starts
	// again in each): the fork server makes each run's namespace and goes
	// back to its own for the next.
	for i := range 3 {
		if res := f.run(context.Background(), t, "import os\nprint(os.getpid())", 30); res.Err != nil || res.Text != "2\n" {
			t.Errorf("run %d: pid = %q, %v; want 2", i, res.Text, res.Err)
		}
	}

	// One run holds a process and a loopback listener; a run beside it
	// must see neither.
	done := make(chan registry.Result, 1)
	go func() {
		done <- f.run(context.Background(), t, "import socket, subprocess, time\n"+
			"p = subprocess.Popen(['sleep', '30'])\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"+
			"open('held.tmp', 'w').write(str(s.getsockname()[1]))\nimport os\nos.rename('held.tmp', 'held')\ntime.sleep(30)", 5)
	}()
	held := filepath.Join(ws, "held")
	deadline := time.Now().Add(envtest.Timeout)
	for {
		if _, err := os.Stat(held); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run never started its process")
		}
		time.Sleep(10 * time.Millisecond)
	}
	port, err := os.ReadFile(held)
	if err != nil {
		t.Fatal(err)
	}
	res = f.run(context.Background(), t, "import os, socket\n"+
		"cmds = [open('/proc/%s/cmdline' % p).read() for p in os.listdir('/proc') if p.isdigit()]\n"+
		"print(any(c.split('\\0')[0].endswith('sleep') for c in cmds))\n"+
		"try:\n    socket.create_connection(('127.0.0.1', "+string(port)+"), timeout=2)\n    print('reached')\nexcept OSError:\n    print('apart')\n", 30)
	if res.Err != nil || res.Text != "False\napart\n" {
		t.Errorf("a run beside another = %q, %v; want it to see neither its processes nor its listener", res.Text, res.Err)
	}
	if r := <-done; r.Err == nil || !strings.Contains(r.Err.Message, "timed out") {
		t.Errorf("holding run = %q, %v; want a timeout", r.Text, r.Err)
	}
}

// TestForkedSandboxProcesses: the sandbox's processes limit holds for
// each forked run on its own.
func TestForkedSandboxProcesses(t *testing.T) {
	testenv.MustHaveBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("a per-run processes limit needs the pids cgroup (root); without it runs are spawned")
	}
	const limit = 20
	profiles := "[profiles.default]\ncode_mode = true\nenvironment = \"sandbox\"\n\n[profiles.default.sandbox]\nprocesses = " + strconv.Itoa(limit) + "\n"
	f := newForkedApp(t, appOptions{profiles: profiles, modules: []string{"codemode", "spill"}})
	code := "import os, time\nn = 0\ntry:\n    while n < 10000:\n        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print(n, e.errno)\n"
	for range 2 { // the second run gets the whole limit again
		res := f.run(context.Background(), t, code, 30)
		var n, errno int
		if _, err := fmt.Sscan(res.Text, &n, &errno); err != nil || res.Err != nil {
			t.Fatalf("fork bomb = %q, %v", res.Text, res.Err)
		}
		if n >= limit || n < limit-5 {
			t.Errorf("forked %d processes under processes = %d; want the limit to stop it just below", n, limit)
		}
	}
}
