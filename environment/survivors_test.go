package environment_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/environment/envtest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
)

// TestNoSurvivors: a setsid daemon started by a process is gone when the
// process is cancelled, killed, or its environment closed, on both
// environments. (The local environment needs a writable cgroup hierarchy
// for this; see LocalEnvironment.)
func TestNoSurvivors(t *testing.T) {
	t.Parallel()
	envs := map[string]func(t *testing.T, ws string) environment.Environment{
		"local": func(t *testing.T, ws string) environment.Environment {
			e, err := environment.NewLocal(&environment.LocalOptions{Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			testenv.MustHave(t, e.TracksTrees(), "a writable cgroup hierarchy (without one, setsid daemons escape the local environment)",
				"run as root, or in a container with a delegated cgroup v2 hierarchy")
			return e
		},
		"sandbox": func(t *testing.T, ws string) environment.Environment {
			testenv.MustHaveBwrap(t)
			e, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
	}
	ends := map[string]func(e environment.Environment, p environment.Process, cancel context.CancelFunc){
		"cancel": func(_ environment.Environment, _ environment.Process, cancel context.CancelFunc) { cancel() },
		"kill":   func(_ environment.Environment, p environment.Process, _ context.CancelFunc) { p.Signal(true) },
		"close":  func(e environment.Environment, _ environment.Process, _ context.CancelFunc) { e.Close() },
	}
	for ename, mk := range envs {
		for how, end := range ends {
			t.Run(ename+"/"+how, func(t *testing.T) {
				t.Parallel()
				ws := t.TempDir()
				e := mk(t, ws)
				t.Cleanup(func() { e.Close() })
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				lock := filepath.Join(ws, "lock")
				p, err := e.Spawn(ctx, environment.Spec{
					Command: `setsid -f flock -x "$L" sh -c 'echo > "$L.ready"; exec sleep 1000' </dev/null >/dev/null 2>&1; while [ ! -e "$L.ready" ]; do sleep 0.01; done; echo held; exec sleep 1000`,
					Env:     []string{"L=" + lock},
				})
				if err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 5)
				if n, err := p.Stdout().Read(buf); err != nil || string(buf[:n]) != "held\n" {
					t.Fatalf("daemon did not start: %q, %v", buf[:n], err)
				}
				if !envtest.Locked(t, lock) {
					t.Fatal("the daemon holds no lock")
				}
				end(e, p, cancel)
				envtest.Wait(t, p)
				envtest.WaitUnlocked(t, lock)
			})
		}
	}
}
