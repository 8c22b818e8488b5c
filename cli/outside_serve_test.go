package cli_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestServeOnATerminalSaysWhatItIs: `bub-mcp serve` typed by a person
// (stdin a terminal) says on stderr that it speaks MCP to a client and how
// to try it by hand, instead of seeming to hang; a client's pipe gets no
// such line.
func TestServeOnATerminalSaysWhatItIs(t *testing.T) {
	const hint = "bub-mcp serve speaks MCP over stdio"
	t.Run("terminal", func(t *testing.T) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		cmd := exec.Command(binary(t), "serve", "--workspace", t.TempDir())
		cmd.Env = agentEnv(t.TempDir(), "")
		stderr := &ptyOutput{}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &ptyOutput{}, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		stderr.waitFor(t, hint, 1)
		if !strings.Contains(stderr.String(), "serve --http 127.0.0.1:8080") {
			t.Errorf("stderr = %q; want the way to try it by hand", stderr.String())
		}
	})
	t.Run("pipe", func(t *testing.T) {
		code, stdout, stderr := runBinary(t, agentEnv(t.TempDir(), ""), "", "serve", "--workspace", t.TempDir())
		if code != 0 || strings.Contains(stderr, hint) {
			t.Errorf("exit %d; want 0 without the hint\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
	})
}
