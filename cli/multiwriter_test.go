package cli_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestManyWritersOneHome runs two `bub-mcp serve` processes and
// `bub-mcp call` on one $BUB_HOME and one session, as a user with two IDE
// windows and a shell has them: handoffs written through all three at
// once all land on the tape with distinct increasing ids, each server
// sees the others' anchors, and a code-mode switch made by `bub-mcp call`
// shows on both servers' next tools/list, without a restart.
func TestManyWritersOneHome(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed") // run_code, which code mode shows, needs it
	}
	home, ws, env := codeModeEnv(t, "")
	servers := []*codeModeServer{startCodeMode(t, home, ws, env), startCodeMode(t, home, ws, env)}
	for i, s := range servers {
		if _, ok := listTools(t, s.c)["run_code"]; ok {
			t.Fatalf("server %d: code mode on before any switch", i)
		}
	}

	const perServer, perCLI = 15, 4
	var wg sync.WaitGroup
	for i, s := range servers {
		for g := range 3 { // concurrent calls within each server too
			wg.Go(func() {
				for k := range perServer / 3 {
					handoff(t, s.c, fmt.Sprintf("s%d-g%d-%d", i, g, k))
				}
			})
		}
	}
	wg.Go(func() {
		for k := range perCLI {
			cmd := exec.Command(binary(t), "call", "tape.handoff", "name=cli-"+fmt.Sprint(k), "summary=from the shell")
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("bub-mcp call tape.handoff: %v\n%s", err, out)
			}
		}
	})
	wg.Wait()

	handoffs := 2*perServer + perCLI
	for i, s := range servers {
		res, err := callTool(t.Context(), s.c, "tape_info", nil, nil)
		if err != nil || res.IsError {
			t.Fatalf("server %d tape_info: %v %v", i, err, res)
		}
		// Each handoff is an anchor and a handoff event.
		if want := fmt.Sprintf("entries: %d\nanchors: %d\n", 2*handoffs, handoffs); !strings.Contains(resultText(res), want) {
			t.Errorf("server %d tape_info = %q; want %q", i, resultText(res), want)
		}
	}

	if out := bubCall(t, env, "code_mode", "enable=true"); !strings.Contains(out, "enabled") {
		t.Fatalf("code_mode enable=true printed %q", out)
	}
	// Another process's switch shows within 1 s (a process looks at the
	// tape at most every 250 ms).
	within := func(cond func() bool) bool {
		for deadline := time.Now().Add(time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				return false
			}
		}
		return true
	}
	for i, s := range servers {
		if !within(func() bool { _, ok := listTools(t, s.c)["run_code"]; return ok }) {
			t.Errorf("server %d: run_code not listed within 1 s after another process switched code mode on", i)
		}
		if _, ok := listTools(t, s.c)["tape_info"]; ok {
			t.Errorf("server %d: tape_info still listed directly in code mode", i)
		}
	}
	bubCall(t, env, "code_mode", "enable=false")
	for i, s := range servers {
		if !within(func() bool { _, ok := listTools(t, s.c)["tape_info"]; return ok }) {
			t.Errorf("server %d: direct tools not back within 1 s after the switch off", i)
		}
	}

	// The file: Bub's JSONL, every id once, in order.
	tapes, _ := filepath.Glob(filepath.Join(home, "tapes", "*.jsonl"))
	if len(tapes) != 1 {
		t.Fatalf("tapes = %v; want the one shared session's", tapes)
	}
	ids := tapeIDs(t, tapes[0])
	want := 2*handoffs + 2 // and the two switches
	if len(ids) != want {
		t.Errorf("tape has %d entries; want %d", len(ids), want)
	}
	for i, id := range ids {
		if id != i+1 {
			t.Fatalf("tape ids are not 1..%d in order: %v", len(ids), ids)
		}
	}
}

func handoff(t *testing.T, c *client.Client, name string) {
	res, err := callTool(t.Context(), c, "tape_handoff", map[string]any{"name": name, "summary": "s"}, nil)
	if err != nil || res.IsError {
		t.Errorf("tape_handoff %s: %v %v", name, err, resultText(res))
	}
}

func tapeIDs(t *testing.T, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct{ ID int }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("tape line %q: %v", sc.Text(), err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

// TestKilledServerLosesNothingAcknowledged SIGKILLs a `bub-mcp serve`
// while clients are writing handoffs through it: every handoff the server
// acknowledged is on the tape, the ids of what is there increase without
// a gap or a duplicate, and the next writer (`bub-mcp call`) continues
// after them.
// killMidStream starts `bub-mcp serve` with env, has four clients write
// handoffs through it, SIGKILLs it after 40 acknowledgements and returns
// the names of the handoffs it acknowledged.
func killMidStream(t *testing.T, env []string) []string {
	t.Helper()
	cmd, c := stdioClient(t, env, mcp.LATEST_PROTOCOL_VERSION, "crash-test", "serve")

	var mu sync.Mutex
	var acked []string
	killed := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := 0; ; k++ {
				name := fmt.Sprintf("g%d-%d", g, k)
				res, err := callTool(t.Context(), c, "tape_handoff", map[string]any{"name": name, "summary": "s"}, nil)
				if err != nil {
					return // the server is gone
				}
				if res.IsError {
					t.Errorf("tape_handoff %s: %s", name, resultText(res))
					return
				}
				mu.Lock()
				acked = append(acked, name)
				n := len(acked)
				mu.Unlock()
				if n == 40 {
					close(killed)
				}
			}
		})
	}
	<-killed
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	c.Close()
	return acked
}

func TestKilledServerLosesNothingAcknowledged(t *testing.T) {
	home, _, env := codeModeEnv(t, "")
	acked := killMidStream(t, env)
	bubCall(t, env, "tape.handoff", "name=after-crash", "summary=s")
	tapes, _ := filepath.Glob(filepath.Join(home, "tapes", "*.jsonl"))
	if len(tapes) != 1 {
		t.Fatalf("tapes = %v; want one", tapes)
	}
	b, err := os.ReadFile(tapes[0])
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	last := 0
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var e struct {
			ID      int
			Kind    string
			Payload struct{ Name string }
		}
		if json.Unmarshal([]byte(line), &e) != nil {
			continue // a torn line from the kill is allowed, and skipped
		}
		if e.ID != last+1 {
			t.Fatalf("id %d follows %d", e.ID, last)
		}
		last = e.ID
		if e.Kind == "anchor" {
			anchors[e.Payload.Name] = true
		}
	}
	for _, name := range acked {
		if !anchors[name] {
			t.Errorf("acknowledged handoff %s is not on the tape", name)
		}
	}
	if !anchors["after-crash"] {
		t.Error("the handoff made after the crash is missing")
	}
}
