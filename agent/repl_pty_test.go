package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/internal/testbin"
	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// terminal is `bub-mcp agent` running in a pseudo-terminal, typed at as
// a person would.
type terminal struct {
	t   *testing.T
	cmd *exec.Cmd
	tty *os.File
	mu  sync.Mutex
	out bytes.Buffer
}

// startTerminal runs `bub-mcp agent` with $BUB_HOME home, against the
// OpenAI-style model at modelURL ("" for none).
func startTerminal(t *testing.T, home, modelURL string) *terminal {
	t.Helper()
	bin := testbin.Build(t, "github.com/bubbuild/bub-mcp/cmd/bub-mcp")
	cmd := exec.Command(bin, "agent", "--workspace", t.TempDir())
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BUB_") && !strings.HasPrefix(kv, "TERM=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "BUB_HOME="+home, "TERM=xterm")
	if modelURL != "" {
		cmd.Env = append(cmd.Env, "BUB_MODEL=openai:fake-model", "BUB_API_BASE="+modelURL+"/v1", "BUB_API_KEY=test-key")
	}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, cmd: cmd, tty: tty}
	go io.Copy(term, tty)
	t.Cleanup(func() {
		cmd.Process.Kill()
		tty.Close()
	})
	return term
}

func (term *terminal) Write(p []byte) (int, error) {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.Write(p)
}

func (term *terminal) String() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

func (term *terminal) send(s string) {
	term.t.Helper()
	if _, err := term.tty.Write([]byte(s)); err != nil {
		term.t.Fatal(err)
	}
}

// waitFor waits until the terminal shows s n times in all, and then the
// prompt after the n-th, when the REPL reads the next line (Ctrl-C typed
// before then would interrupt, not edit). The deadline only guards
// against a hung REPL.
func (term *terminal) waitFor(s string, n int) {
	term.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := term.String()
		if i := nthIndex(got, s, n); i >= 0 && strings.Contains(got[i+len(s):], "bub> ") {
			return
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("no %d× %q followed by a prompt in the terminal:\n%s", n, s, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitShown waits until the terminal shows s n times, prompt or not.
func (term *terminal) waitShown(s string, n int) {
	term.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(term.String(), s) < n {
		if time.Now().After(deadline) {
			term.t.Fatalf("no %d× %q in the terminal:\n%s", n, s, term.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func nthIndex(s, sub string, n int) int {
	at := -1
	for range n {
		i := strings.Index(s[at+1:], sub)
		if i < 0 {
			return -1
		}
		at += 1 + i
	}
	return at
}

// exit types Ctrl-D and waits for the REPL to end with status 0.
func (term *terminal) exit() {
	term.t.Helper()
	term.send("\x04")
	done := make(chan error, 1)
	go func() { done <- term.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			term.t.Fatalf("after Ctrl-D: %v\n%s", err, term.String())
		}
	case <-time.After(60 * time.Second):
		term.t.Fatalf("Ctrl-D did not end the REPL:\n%s", term.String())
	}
}

// TestREPLTerminalEditing types at the REPL through a pseudo-terminal:
// Tab completes a tool's and a session command's name, ",bash echo …" runs the rest of the
// line, Ctrl-C on an empty line says how to leave instead of leaving,
// Ctrl-R finds an earlier line, Ctrl-D leaves; the history is kept in
// $BUB_HOME/agent_history (0600, without the line typed with a leading
// space), and the up arrow of a second run recalls the first run's line.
func TestREPLTerminalEditing(t *testing.T) {
	home := t.TempDir()
	term := startTerminal(t, home, "")
	term.waitShown("bub> ", 1)
	term.send(",tape.inf\t\r") // Tab completes a tool's name: ,tape.info
	term.waitFor("entries:", 1)
	term.send(",reas\t\r") // and a session command's: ,reasoning_effort
	term.waitFor("Session reasoning effort: ", 1)
	term.send(",bash echo $((6*7)) done\r")
	term.waitFor("42 done", 1)
	term.send("\x03") // Ctrl-C on an empty line: a hint, no exit
	term.waitFor("(Ctrl-D or ,quit leaves)", 1)
	term.send("half typed\x03") // Ctrl-C on a typed line discards it
	term.waitFor("(Ctrl-D or ,quit leaves)", 2)
	term.send(" ,bash echo not-$((1+1))-kept\r") // a leading space keeps the line out of the history
	term.waitFor("not-2-kept", 1)
	term.send("\x12tape\r") // Ctrl-R: the last line holding "tape"
	term.waitFor("entries:", 2)
	if n := strings.Count(term.String(), "Ctrl-D or ,quit leaves"); n != 2 {
		t.Errorf("%d hints; want one per Ctrl-C", n)
	}
	term.exit()

	path := filepath.Join(home, agent.HistoryFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("history file mode %v; want 0600", st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := ",tape.info\n,reasoning_effort\n,bash echo $((6*7)) done\n,tape.info\n"
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("history file (-want +got):\n%s", diff)
	}

	term = startTerminal(t, home, "")
	term.waitShown("bub> ", 1)
	term.send("\x1b[A\x1b[A\r") // up twice: the first run's ,bash line
	term.waitFor("42 done", 1)
	term.exit()
}

// TestREPLHistoryBounded: a history file grown past the bound (by hand or
// by other programs) is read back to its last 1000 lines, and the next
// save writes no more than those.
func TestREPLHistoryBounded(t *testing.T) {
	home := t.TempDir()
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, ",bash echo out-$((%d))\n", i)
	}
	b.WriteString(strings.Repeat("x", 5000) + "\n") // too long to keep
	path := filepath.Join(home, agent.HistoryFile)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	term := startTerminal(t, home, "")
	term.waitShown("bub> ", 1)
	term.send("\x1b[A\r") // the last usable line
	term.waitFor("out-1499", 1)
	term.exit()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) != 1000 || lines[0] != ",bash echo out-$((500))" || lines[999] != ",bash echo out-$((1499))" {
		t.Errorf("history file has %d lines, %q … %q; want the last 1000", len(lines), lines[0], lines[len(lines)-1])
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("history file after saving: %v, %v; want mode 0600", st.Mode().Perm(), err)
	}
}

// stallingModel is an OpenAI-style model server whose first answer
// streams "partial answer" and then stalls until the client goes away;
// later answers are "second answer".
type stallingModel struct {
	mu   sync.Mutex
	reqs []map[string]any
}

func (m *stallingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	n := len(m.reqs)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if n == 1 {
		chunk(map[string]any{"content": "partial answer"}, nil)
		<-r.Context().Done()
		return
	}
	chunk(map[string]any{"content": "second answer"}, nil)
	chunk(map[string]any{}, "stop")
	io.WriteString(w, "data: [DONE]\n\n")
}

func (m *stallingModel) messages(i int) []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []map[string]any
	for _, msg := range m.reqs[i]["messages"].([]any) {
		out = append(out, msg.(map[string]any))
	}
	return out
}

// TestREPLCtrlCMidTurn: Ctrl-C while the model streams stops the turn,
// the REPL goes on, and the text streamed so far stays on the terminal
// and on the tape: the next turn's model request carries the question
// and the partial answer.
func TestREPLCtrlCMidTurn(t *testing.T) {
	model := &stallingModel{}
	srv := httptest.NewServer(model)
	defer srv.Close()
	term := startTerminal(t, t.TempDir(), srv.URL)
	term.waitShown("bub> ", 1)
	term.send("tell me a story\r")
	term.waitShown("partial answer", 1)
	term.send("\x03") // SIGINT: cancels the turn only
	term.waitFor("cancelled", 1)
	term.send("go on\r")
	term.waitFor("second answer", 1)
	term.exit()

	var got []string
	for _, m := range model.messages(1)[1:] { // after the system prompt
		got = append(got, fmt.Sprintf("%v: %v", m["role"], m["content"]))
	}
	want := []string{"user: tell me a story", "assistant: partial answer", "user: go on"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the second turn's messages (-want +got):\n%s", diff)
	}
	if i := strings.Index(term.String(), "partial answer"); i < 0 || !strings.Contains(term.String()[i:], "cancelled") {
		t.Errorf("the terminal should keep the partial answer, then say cancelled:\n%s", term.String())
	}
}
