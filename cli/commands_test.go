package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/fakemodel"
	"github.com/google/go-cmp/cmp"
)

// runBinary runs the built bub-mcp with env and stdin and returns its
// exit status and both streams.
func runBinary(t *testing.T, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// bigOutput is a bash command printing 20,000 characters, past the spill
// threshold (16,384) that applies to models.
const bigOutput = `python3 -c "print(20000*chr(120))"`

// TestCommandsBypassSpill: the operator sees a command's whole output,
// from `bub-mcp call` and from a comma command, as in Bub; only a model's
// call is spilled.
func TestCommandsBypassSpill(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	env := agentEnv(home, "")
	for _, args := range [][]string{
		{"call", "--workspace", ws, "bash", "command=" + bigOutput},
		{"agent", "--workspace", ws, "-p", ",bash command='" + bigOutput + "'"},
	} {
		code, stdout, stderr := runBinary(t, env, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if want := strings.Repeat("x", 20000) + "\n"; stdout != want {
			t.Errorf("%v: stdout has %d bytes (%.80q); want the 20,001 unspilled", args, len(stdout), stdout)
		}
	}
}

// TestCommandEvents: a comma command emits text and final events as a
// model turn does (--json shows them), a failed one an error event and
// exit status 1, and neither reaches the model.
func TestCommandEvents(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t))
	home, ws := t.TempDir(), t.TempDir()
	env := agentEnv(home, srv.URL)
	type event struct {
		Kind, Delta, Text, Name, Error string
	}
	decode := func(out string) []event {
		var evs []event
		for line := range strings.Lines(out) {
			var e event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("not a JSON event: %q", line)
			}
			evs = append(evs, e)
		}
		return evs
	}
	code, stdout, stderr := runBinary(t, env, "", "agent", "--workspace", ws, "--json", "-p", ",bash command='echo hi'")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []event{{Kind: "text", Delta: "hi"}, {Kind: "final", Text: "hi", Name: "bash"}}
	if diff := cmp.Diff(want, decode(stdout)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	code, stdout, _ = runBinary(t, env, "", "agent", "--workspace", ws, "--json", "-p", ",fs.read path=missing.txt")
	evs := decode(stdout)
	if code != 1 || len(evs) != 1 || evs[0].Kind != "error" || evs[0].Name != "fs.read" || !strings.Contains(evs[0].Error, "missing.txt") {
		t.Errorf("failed command: exit %d, events %+v; want one error event and status 1", code, evs)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the model got %d requests; commands must not reach it", n)
	}
}

// TestCallSessionCommands: help, model, reasoning_effort and quit work
// from `bub-mcp call` as in the REPL, on the --session's settings, and
// the configured command prefix is accepted.
func TestCallSessionCommands(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	env := agentEnv(home, "", "BUB_COMMAND_PREFIX=/")
	tests := []struct {
		args       []string
		code       int
		out, inErr string
	}{
		{args: []string{"help"}, out: "Commands start with '/' at the beginning of a line:\n"},
		{args: []string{"model"}, code: 1, inErr: "no model configured: set BUB_MODEL"},
		{args: []string{"model", "openai:gpt-4o-mini"}, out: "Session model set to openai:gpt-4o-mini (applies from the next turn).\n"},
		{args: []string{"/model"}, out: "Session model: openai:gpt-4o-mini\n"},
		{args: []string{"model", ""}, out: "Session model cleared (applies from the next turn); no default model is configured.\n"},
		{args: []string{"reasoning_effort", "medium"}, out: "Session reasoning effort set to medium (applies from the next turn).\n"},
		{args: []string{"reasoning_effort"}, out: "Session reasoning effort: medium\n"},
		{args: []string{"reasoning_effort", "lots"}, code: 1, inErr: `reasoning_effort: "lots" is not one of`},
		{args: []string{"quit"}},
	}
	for _, tt := range tests {
		args := append([]string{"call", "--workspace", ws, "--session", "s1"}, tt.args...)
		code, stdout, stderr := runBinary(t, env, "", args...)
		if code != tt.code || !strings.HasPrefix(stdout, tt.out) || (tt.out == "" && stdout != "") || !strings.Contains(stderr, tt.inErr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, stdout %q..., stderr containing %q", tt.args, code, stdout, stderr, tt.code, tt.out, tt.inErr)
		}
	}
}

// TestCodeModeGatherHonoursMaxConcurrency: [tools] max_concurrency caps
// how many of one run_code's gathered calls run at once, as it caps a
// batch of direct calls. The server meets the fetches at a rendezvous:
// unbounded, all three arrive together; capped at one, never two.
func TestCodeModeGatherHonoursMaxConcurrency(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	for _, tt := range []struct {
		limit, want int64
	}{{0, 3}, {1, 1}} {
		var mu sync.Mutex
		var inFlight, most int64
		arrived := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			if inFlight == 3 {
				close(arrived)
			}
			mu.Unlock()
			select { // the rendezvous: all three, or give up and count
			case <-arrived:
			case <-time.After(500 * time.Millisecond):
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
			w.Write([]byte("ok"))
		}))
		_, _, env := codeModeEnv(t, fmt.Sprintf("[tools]\nmax_concurrency = %d\n[web]\nallow_loopback = true\n", tt.limit))
		bubCall(t, env, "code_mode", "enable=true")
		code := fmt.Sprintf("import asyncio\nr = await asyncio.gather(*[tools.web_fetch(url=%q) for _ in range(3)])\nprint(len(r))", srv.URL)
		if out := bubCall(t, env, "run_code", "code="+code); out != "3\n" {
			t.Errorf("limit %d: run_code printed %q", tt.limit, out)
		}
		srv.Close()
		if most != tt.want {
			t.Errorf("max_concurrency = %d: %d fetches at once; want %d", tt.limit, most, tt.want)
		}
	}
}

// TestServeRefusesMissingWorkspace: serve does not start on a workspace
// that is not there, and says which one and where it came from.
func TestServeRefusesMissingWorkspace(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "bub.toml")
	if err := os.WriteFile(cfg, []byte("[profiles.other]\nworkspace = \"/no/such/dir\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, "file.txt")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := agentEnv(home, "")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--workspace", "/abs/${workspaceFolder}"}, "bub-mcp serve: workspace /abs/${workspaceFolder} (--workspace) does not exist; it holds an unexpanded variable"},
		{[]string{"serve", "--workspace", file}, "bub-mcp serve: workspace " + file + " (--workspace) is not a directory"},
		{[]string{"serve", "--config", cfg, "--profile", "other"}, "bub-mcp serve: config: " + cfg + ":2: profiles.other.workspace: workspace /no/such/dir (profile other) does not exist"},
		{[]string{"serve", "--config", cfg, "--http", "127.0.0.1:0"}, "profiles.other.workspace: workspace /no/such/dir (profile other) does not exist"},
	}
	for _, tt := range tests {
		code, stdout, stderr := runBinary(t, env, "", tt.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", tt.args, code, stdout, stderr, tt.want)
		}
	}
}

// TestMissingKeyNamesTheVariable: a hosted model without a key fails at
// once, naming the variables to set, before any request.
func TestMissingKeyNamesTheVariable(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	for _, tt := range []struct{ model, want string }{
		{"openrouter:openrouter/free", "no API key for openrouter: set BUB_OPENROUTER_API_KEY (or BUB_API_KEY, or OPENROUTER_API_KEY)"},
		{"anthropic:claude-sonnet-4-5", "no API key for anthropic: set BUB_ANTHROPIC_API_KEY (or BUB_API_KEY, or ANTHROPIC_API_KEY)"},
	} {
		var env []string
		for _, kv := range agentEnv(home, "") {
			if !strings.Contains(kv, "_API_KEY=") {
				env = append(env, kv)
			}
		}
		code, _, stderr := runBinary(t, append(env, "BUB_MODEL="+tt.model), "", "agent", "--workspace", ws, "-p", "hello")
		if code != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s without a key: exit %d, stderr %q; want exit 1 and %q", tt.model, code, stderr, tt.want)
		}
	}
}
