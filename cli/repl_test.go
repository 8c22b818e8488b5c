package cli_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyOutput collects what the REPL writes to its terminal.
type ptyOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *ptyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *ptyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output holds s n times; the deadline only
// guards against a hung REPL.
func (o *ptyOutput) waitFor(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(o.String(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %d× %q in the terminal:\n%s", n, s, o.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestREPLInATerminal drives `bub-mcp agent` through a pseudo-terminal,
// as a person would: the up arrow recalls the last line, Ctrl-C discards
// a half-typed line, ,history lists what was typed, a running command
// shows its elapsed time and streamed output and Ctrl-C cancels it while
// the REPL goes on, and Ctrl-D on an empty line leaves.
func TestREPLInATerminal(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	cmd := exec.Command(binary(t), "agent", "--workspace", ws)
	cmd.Env = append(agentEnv(home, ""), "TERM=xterm")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	out := &ptyOutput{}
	copied := make(chan struct{})
	go func() { io.Copy(out, tty); close(copied) }()
	t.Cleanup(func() { cmd.Process.Kill() })
	send := func(s string) {
		if _, err := tty.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	const prompt = "bub> "
	out.waitFor(t, prompt, 1)
	send(",tape.info\r")
	out.waitFor(t, "entries:", 1)
	out.waitFor(t, prompt, 2)
	send("\x1b[A\r") // up arrow: the same command again
	out.waitFor(t, "entries:", 2)
	out.waitFor(t, prompt, 3)
	send("half typed\x03") // Ctrl-C on a non-empty line: a fresh prompt
	out.waitFor(t, prompt, 4)
	send(",history\r")
	out.waitFor(t, prompt, 5)
	if got := out.String(); !strings.Contains(got, ",tape.info\r\n") || strings.Contains(got[strings.LastIndex(got, ",history"):], "half typed") {
		t.Errorf(",history should list ,tape.info and not the discarded line:\n%s", got)
	}
	send(",bash command='echo started; sleep 60'\r")
	out.waitFor(t, "started · Ctrl-C cancels", 1) // the live status line, with the streamed output
	send("\x03")                                  // Ctrl-C while it runs: SIGINT cancels the command only
	out.waitFor(t, "cancelled", 1)
	out.waitFor(t, prompt, 6)
	send("\x04") // Ctrl-D on an empty line
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Errorf("exit %d after Ctrl-D:\n%s", exit.ExitCode(), out.String())
		} else if err != nil {
			t.Error(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Ctrl-D did not end the REPL:\n%s", out.String())
	}
}

// TestCallStreamsProgressInATerminal runs `bub-mcp call bash` with its
// stderr a pseudo-terminal: bash's first line shows there while the
// command still runs (it waits for a file the test creates only once the
// line is shown), and stdout, a pipe, gets the result alone. With stderr
// a pipe, stderr stays quiet.
func TestCallStreamsProgressInATerminal(t *testing.T) {
	ws := t.TempDir()
	script := "command=echo first; while [ ! -e gate ]; do sleep 0.05; done; echo second"
	for _, terminal := range []bool{true, false} {
		gate := filepath.Join(ws, "gate")
		os.Remove(gate)
		cmd := exec.Command(binary(t), "call", "--workspace", ws, "bash", script)
		cmd.Env = agentEnv(t.TempDir(), "")
		stdout, stderr := &ptyOutput{}, &ptyOutput{}
		cmd.Stdout = stdout
		if terminal {
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = tty
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			tty.Close()
			copied := make(chan struct{})
			go func() { io.Copy(stderr, ptmx); close(copied) }()
			t.Cleanup(func() { cmd.Process.Kill(); ptmx.Close() })
			stderr.waitFor(t, "first", 1) // shown while bash waits for the gate
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("call: %v; terminal:\n%s", err, stderr.String())
			}
			<-copied
		} else {
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("call: %v; stderr %q", err, stderr.String())
			}
			if got := stderr.String(); got != "" {
				t.Errorf("with stderr a pipe, stderr = %q; want nothing", got)
			}
		}
		if got := stdout.String(); got != "first\nsecond\n" {
			t.Errorf("terminal=%v: stdout %q; want the result alone", terminal, got)
		}
	}
}
