package cli_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment/envtest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestServerExitEndsDaemons: a setsid daemon started from a background
// shell is gone once the server process exits on SIGTERM, on both
// environments (a real binary over stdio).
func TestServerExitEndsDaemons(t *testing.T) {
	for _, env := range []string{"local", "sandbox"} {
		t.Run(env, func(t *testing.T) {
			if env == "sandbox" {
				testenv.MustHaveBwrap(t)
			} else {
				envtest.RequireTreeTracking(t)
			}
			ws := t.TempDir()
			src := fmt.Sprintf("[profiles.default]\nworkspace = %q\nenvironment = %q\n", ws, env)
			cfg := writeConfig(t, src)
			cmd := exec.Command(binary(t), "serve")
			cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			c := client.NewClient(transport.NewIO(stdout, stdin, io.NopCloser(nil)))
			if err := c.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
			if _, err := c.Initialize(t.Context(), init); err != nil {
				t.Fatal(err)
			}
			lock := filepath.Join(ws, "lock")
			res, err := callTool(t.Context(), c, "bash", map[string]any{
				"command":    `setsid -f flock -x lock sh -c 'echo > lock.ready; exec sleep 1000' </dev/null >/dev/null 2>&1; sleep 1000`,
				"background": true,
			}, nil)
			if err != nil || res.IsError {
				t.Fatalf("bash: %+v, %v", res, err)
			}
			deadline := time.Now().Add(envtest.Timeout)
			for {
				if _, err := os.Stat(lock + ".ready"); err == nil && envtest.Locked(t, lock) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the daemon did not take its lock")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
				exited <- nil
			case <-time.After(envtest.Timeout):
				t.Fatal("the server did not exit on SIGTERM")
			}
			envtest.WaitUnlocked(t, lock)
		})
	}
}
