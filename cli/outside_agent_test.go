package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAgentDevNullIsNoPrompt: /dev/null is a character device but not a
// terminal; `bub-mcp agent </dev/null` (cron, CI, nohup) has no prompt and
// must say so with status 2, not open the REPL and exit 0.
func TestAgentDevNullIsNoPrompt(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd := exec.Command(binary(t), "agent", "--workspace", t.TempDir())
	cmd.Env = agentEnv(t.TempDir(), "")
	cmd.Stdin = null
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 2 || !strings.Contains(stderr.String(), "no prompt: pass -p PROMPT") {
		t.Errorf("exit %d; want 2 with \"no prompt\"\nstdout: %q\nstderr: %q", code, stdout.String(), stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), "bub>") {
		t.Errorf("the REPL opened on /dev/null:\nstdout: %q\nstderr: %q", stdout.String(), stderr.String())
	}
}
