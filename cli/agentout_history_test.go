package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentHistoryOutsideREPL: `agent -p ,history` (and ,history with
// arguments) ran bash's own history builtin, which printed nothing, so the
// answer was "(no output)" whatever the REPL had kept. It must list the
// kept lines, say when there are none, and refuse arguments.
func TestAgentHistoryOutsideREPL(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	env := agentEnv(home, "")
	code, stdout, stderr := runAgentBinary(t, env, "", "--workspace", ws, "-p", ",history")
	if code != 0 || !strings.Contains(stdout, "No history yet") {
		t.Errorf("empty history: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if err := os.WriteFile(filepath.Join(home, "agent_history"), []byte(",tape.info\nwrite the release notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runAgentBinary(t, env, "", "--workspace", ws, "-p", ",history")
	if code != 0 || stdout != ",tape.info\nwrite the release notes\n" {
		t.Errorf("kept history: exit %d\nstdout: %q\nstderr: %s", code, stdout, stderr)
	}
	// The private history (a typed line may hold a secret) must not reach
	// the tape, which tape.search serves to clients.
	tapes, _ := filepath.Glob(filepath.Join(home, "tapes", "*.jsonl"))
	if len(tapes) == 0 {
		t.Fatal("no tape was written for the ,history command")
	}
	for _, tp := range tapes {
		if b, _ := os.ReadFile(tp); strings.Contains(string(b), "write the release notes") {
			t.Errorf("tape %s holds the history", tp)
		}
	}
	for _, args := range [][]string{{"-p", ",history 5"}, {}} {
		stdin := ""
		if len(args) == 0 {
			stdin = ",history 5\n"
		}
		code, stdout, stderr = runAgentBinary(t, env, stdin, append([]string{"--workspace", ws}, args...)...)
		if code != 1 || !strings.Contains(stderr, "history takes no arguments") {
			t.Errorf("%v %q: exit %d; want 1 refusing the argument\nstdout: %s\nstderr: %s", args, stdin, code, stdout, stderr)
		}
	}
}
