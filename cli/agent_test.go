package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/fakemodel"
)

// agentEnv is the environment of a bub-mcp agent process: its own
// $BUB_HOME, no bub.toml, the fake model.
func agentEnv(home, url string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BUB_") {
			env = append(env, kv)
		}
	}
	env = append(env, "BUB_HOME="+home)
	if url != "" {
		env = append(env, "BUB_MODEL=openai:fake-model", "BUB_API_BASE="+url+"/v1", "BUB_API_KEY=test-key")
	}
	return append(env, extra...)
}

func runAgentBinary(t *testing.T, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runBinary(t, env, stdin, append([]string{"agent"}, args...)...)
}

// TestAgentOneShot drives the real binary, `bub-mcp agent -p`, against
// the fake OpenAI server: the model writes a file, reads it back and
// answers.
func TestAgentOneShot(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Text: "Writing the note.", Calls: []fakemodel.Call{{Name: "fs_write", Arguments: `{"path":"notes/todo.txt","content":"buy milk"}`}}},
		fakemodel.Reply{Calls: []fakemodel.Call{{Name: "fs_read", Arguments: `{"path":"notes/todo.txt"}`}}},
		fakemodel.Reply{Text: "The note says: buy milk"},
	))
	home, ws := t.TempDir(), t.TempDir()
	code, stdout, stderr := runAgentBinary(t, agentEnv(home, srv.URL), "", "--workspace", ws, "-p", "write a note and read it back")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "notes", "todo.txt")); err != nil || string(b) != "buy milk" {
		t.Errorf("notes/todo.txt = %q, %v", b, err)
	}
	if stdout != "Writing the note.\nThe note says: buy milk\n" {
		t.Errorf("stdout = %q", stdout)
	}
	if !strings.Contains(stderr, `→ fs_write {"path":"notes/todo.txt","content":"buy milk"}`) || !strings.Contains(stderr, "← fs_read") {
		t.Errorf("stderr = %q", stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests; want 3", len(reqs))
	}
	msgs := fakemodel.OpenAIMessages(reqs[2])
	if last := msgs[len(msgs)-2]; last.Role != "tool" || last.Content != "buy milk" {
		t.Errorf("the model read %+v; want the file's content", last)
	}

	// The prompt may come on stdin, and --json prints events.
	srv2 := fakemodel.NewOpenAI(t, fakemodel.Replies(t, fakemodel.Reply{Text: "from stdin"}))
	code, stdout, stderr = runAgentBinary(t, agentEnv(home, srv2.URL), "hello there\n", "--workspace", ws, "--json")
	if code != 0 || !strings.Contains(stdout, `{"kind":"final","step":1,"text":"from stdin"`) {
		t.Errorf("--json: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if m := fakemodel.OpenAIMessages(srv2.Requests()[0]); m[len(m)-1].Content != "hello there" {
		t.Errorf("stdin prompt: last message %+v", m[len(m)-1])
	}
}

func TestAgentOneShotFailures(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	t.Run("no model", func(t *testing.T) {
		code, stdout, stderr := runAgentBinary(t, agentEnv(home, ""), "", "--workspace", ws, "-p", "hi")
		if code != 1 || !strings.Contains(stderr, "no model configured: set BUB_MODEL=provider:model") {
			t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
	})
	t.Run("commands work without a model", func(t *testing.T) {
		code, stdout, stderr := runAgentBinary(t, agentEnv(home, ""), "", "--workspace", ws, "-p", ",fs.write path=cmd.txt content='typed by hand'")
		if code != 0 || stdout != "wrote: "+filepath.Join(ws, "cmd.txt")+"\n" {
			t.Errorf("exit %d\nstdout: %q\nstderr: %s", code, stdout, stderr)
		}
		code, _, stderr = runAgentBinary(t, agentEnv(home, ""), "", "--workspace", ws, "-p", ",fs.read path=cmd.txt extra")
		if code != 1 || !strings.Contains(stderr, "positional argument 'extra' cannot appear after keyword arguments") {
			t.Errorf("exit %d, stderr %s", code, stderr)
		}
	})
	t.Run("model error", func(t *testing.T) {
		srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t, fakemodel.Reply{Status: 401, Body: `{"error":{"message":"invalid api key"}}`}))
		code, _, stderr := runAgentBinary(t, agentEnv(home, srv.URL), "", "--workspace", ws, "-p", "hi")
		if code != 1 || !strings.Contains(stderr, "HTTP 401: invalid api key") {
			t.Errorf("exit %d, stderr %s", code, stderr)
		}
	})
	t.Run("bad model flag", func(t *testing.T) {
		code, _, stderr := runAgentBinary(t, agentEnv(home, ""), "", "--model", "nocolon", "-p", "hi")
		if code != 2 || !strings.Contains(stderr, "is not provider:model") {
			t.Errorf("exit %d, stderr %s", code, stderr)
		}
	})
}

// TestAgentCodeMode turns code mode on with the comma command, then lets
// the model do the work in one run_code call.
func TestAgentCodeMode(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("code mode needs python3, and CI must have it")
		}
		t.Skip("code mode needs python3")
	}
	code := "import pathlib\n" +
		"pathlib.Path('code.txt').write_text('written by code')\n" +
		"info = await tools.tape_info()\n" +
		"print(pathlib.Path('code.txt').read_text(), '| entries:', info['entries'] > 0)\n"
	args := `{"code":` + jsonString(code) + `}`
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []fakemodel.Call{{Name: "run_code", Arguments: args}}},
		fakemodel.Reply{Text: "Done in code."},
	))
	home, ws := t.TempDir(), t.TempDir()
	env := agentEnv(home, srv.URL)
	if c, out, errOut := runAgentBinary(t, env, "", "--workspace", ws, "-p", ",code_mode enable=true"); c != 0 || !strings.Contains(out, "Session code mode enabled") {
		t.Fatalf("code_mode: exit %d\nstdout: %s\nstderr: %s", c, out, errOut)
	}
	c, stdout, stderr := runAgentBinary(t, env, "", "--workspace", ws, "-p", "write code.txt with code")
	if c != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", c, stdout, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "code.txt")); string(b) != "written by code" {
		t.Errorf("code.txt = %q", b)
	}
	reqs := srv.Requests()
	tools := fakemodel.ToolNames(reqs[0])
	if !contains(tools, "run_code") || contains(tools, "tape_info") {
		t.Errorf("code mode tools = %v; want run_code, and tape_info only inside it", tools)
	}
	msgs := fakemodel.OpenAIMessages(reqs[0])
	if !strings.Contains(msgs[0].Content, "<code_mode>") {
		t.Errorf("system prompt lacks the code-mode fragment:\n%s", msgs[0].Content)
	}
	result := fakemodel.OpenAIMessages(reqs[1])
	if out := result[len(result)-2].Content; !strings.Contains(out, "written by code | entries: True") {
		t.Errorf("run_code output = %q", out)
	}
	if !strings.Contains(stdout, "Done in code.") {
		t.Errorf("stdout = %q", stdout)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
