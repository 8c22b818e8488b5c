package builtin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/environment/envtest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/registry"
)

// daemonCmd leaves a setsid daemon holding an flock on $L, then waits.
const daemonCmd = `setsid -f flock -x lock sh -c 'echo > lock.ready; exec sleep 1000' </dev/null >/dev/null 2>&1; while [ ! -e lock.ready ]; do sleep 0.01; done; echo ready; sleep 1000`

// waitReady polls until the daemon of daemonCmd holds its lock.
func waitReady(t *testing.T, f *fixture) string {
	t.Helper()
	lock := filepath.Join(f.ws, "lock")
	deadline := time.Now().Add(testTimeout)
	for {
		if _, err := os.Stat(lock + ".ready"); err == nil && envtest.Locked(t, lock) {
			return lock
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not take its lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// skipUntracked skips on a local environment that cannot follow setsid.
func skipUntracked(t *testing.T, f *fixture) {
	if le, ok := f.env.(*environment.LocalEnvironment); ok && !le.TracksTrees() {
		t.Skip("no writable cgroup hierarchy: setsid daemons escape the local environment")
	}
}

// TestBashNoSurvivors: a daemon started by bash is gone when the call is
// cancelled, when its background shell is killed, and when the
// environment closes, on both environments.
func TestBashNoSurvivors(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		eachEnv(t, func(t *testing.T, f *fixture) {
			skipUntracked(t, f)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan registry.Result, 1)
			go func() { done <- f.callCtx(ctx, "bash", map[string]any{"command": daemonCmd}) }()
			lock := waitReady(t, f)
			cancel()
			if res := <-done; res.Err == nil || !strings.Contains(res.Err.Message, "cancelled") {
				t.Errorf("cancelled bash = %+v", res)
			}
			envtest.WaitUnlocked(t, lock)
		})
	})
	t.Run("call ends", func(t *testing.T) {
		eachEnv(t, func(t *testing.T, f *fixture) {
			skipUntracked(t, f)
			got := f.ok("bash", map[string]any{"command": `setsid -f flock -x lock sh -c 'echo > lock.ready; exec sleep 1000' </dev/null >/dev/null 2>&1; while [ ! -e lock.ready ]; do sleep 0.01; done; echo left`})
			if got != "left" {
				t.Fatalf("bash = %q", got)
			}
			envtest.WaitUnlocked(t, filepath.Join(f.ws, "lock"))
		})
	})
	t.Run("timeout then kill", func(t *testing.T) {
		eachEnv(t, func(t *testing.T, f *fixture) {
			skipUntracked(t, f)
			res := f.call("bash", map[string]any{"command": daemonCmd, "timeout_seconds": 1})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			id := shellID(t, res.Text)
			lock := waitReady(t, f)
			f.ok("bash.kill", map[string]any{"shell_id": id})
			envtest.WaitUnlocked(t, lock)
		})
	})
	t.Run("environment close", func(t *testing.T) {
		eachEnv(t, func(t *testing.T, f *fixture) {
			skipUntracked(t, f)
			f.ok("bash", map[string]any{"command": daemonCmd, "background": true})
			lock := waitReady(t, f)
			if err := f.env.Close(); err != nil {
				t.Fatal(err)
			}
			envtest.WaitUnlocked(t, lock)
		})
	})
}

// TestSandboxToolsConfined: in the sandbox, fs tools and bash alike stay
// within what is mounted: confine is implied and covers bash.
func TestSandboxToolsConfined(t *testing.T) {
	testenv.MustHaveBwrap(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := newEnvFixture(t, &Module{}, env)
	if err := os.Symlink(secret, filepath.Join(f.ws, "link")); err != nil {
		t.Fatal(err)
	}
	for _, args := range []map[string]any{{"path": "/etc/hostname"}, {"path": "link"}, {"path": secret}} {
		if res := f.call("fs.read", args); res.Err == nil || strings.Contains(res.Text, "s3cret") {
			t.Errorf("fs.read(%v) = %+v; want it refused", args, res)
		}
	}
	for _, args := range []map[string]any{{"path": "/usr/x", "content": "x"}, {"path": "/etc/passwd", "content": "x"}} {
		if res := f.call("fs.write", args); res.Err == nil {
			t.Errorf("fs.write(%v) succeeded; want it refused", args)
		}
	}
	if res := f.call("bash", map[string]any{"command": "cat " + secret + " link; echo x > /etc/passwd"}); res.Err == nil || strings.Contains(res.Err.Message, "s3cret") {
		t.Errorf("bash reading outside = %+v; want a failure without the secret", res)
	}
	if got := f.ok("fs.write", map[string]any{"path": "in.txt", "content": "mine"}); !strings.Contains(got, "in.txt") {
		t.Errorf("fs.write in the workspace = %q", got)
	}
	if got := f.ok("bash", map[string]any{"command": "cat in.txt"}); got != "mine" {
		t.Errorf("bash cat in.txt = %q; want mine", got)
	}
}
