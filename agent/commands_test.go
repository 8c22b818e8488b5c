package agent_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/google/go-cmp/cmp"
)

func TestCommands(t *testing.T) {
	f := newFixture(t, fixtureOpts{url: "http://127.0.0.1:1"})
	// name is the command's name as the tape records it.
	tests := []struct {
		line, name, out, err string
	}{
		{line: "help", name: "help", out: agent.Help(",")},
		{line: "fs.write path=c.txt content='a b'", name: "fs.write", out: "wrote: " + f.path("c.txt")},
		{line: "fs.read c.txt", name: "fs.read", out: "a b"},
		{line: "echo from-bash", name: "echo", out: "from-bash"},
		{line: "fs_read path=c.txt", name: "fs_read", err: "unknown command \"fs_read\": did you mean `fs.read`? (to run it with bash: ,bash command='fs_read path=c.txt')"}, // model names are not commands
		{line: "fs.raed path=c.txt", name: "fs.raed", err: "unknown command \"fs.raed\": did you mean `fs.read`?"},
		{line: "no-such-program-xyz", name: "no-such-program-xyz", err: "[tool] command exited with code 127"}, // no close tool: bash runs it
		{line: "ls c.txt", name: "ls", out: "c.txt"},    // a program on PATH, however close
		{line: "bash echo hi", name: "bash", out: "hi"}, // the rest of the line is the command, not command=echo cwd=hi
		{line: "bash echo a=b  'c  d'", name: "bash", out: "a=b c  d"},
		{line: "bash FOO=1 sh -c 'echo $FOO'", name: "bash", out: "1"},
		{line: "bash 'echo one word'", name: "bash", out: "one word"},
		{line: "bash command='echo kw' timeout_seconds=5", name: "bash", out: "kw"},
		{line: "reasoning_effort", name: "reasoning_effort", out: "Session reasoning effort: the model's default"},
		{line: "reasoning_effort high", name: "reasoning_effort", out: "Session reasoning effort set to high (applies from the next turn)."},
		{line: "reasoning_effort", name: "reasoning_effort", out: "Session reasoning effort: high"},
		{line: "reasoning_effort huge", name: "reasoning_effort", err: `reasoning_effort: "huge" is not one of none, minimal, low, medium, high, xhigh, max`},
		{line: "fs.read path=c.txt extra", name: "fs.read", err: "positional argument 'extra' cannot appear after keyword arguments"},
		{line: "fs.read offset=x path=c.txt", name: "fs.read", err: "[invalid_input] Tool 'fs.read' argument validation failed."},
		{line: "", name: "", err: "empty command"},
		{line: `fs.read "c.txt`, name: "", err: "no closing quotation"},
		{line: "model openai:other-model", name: "model", out: "Session model set to openai:other-model (applies from the next turn)."},
		{line: "model", name: "model", out: "Session model: openai:other-model"},
		{line: "model nocolon", name: "model", err: `model: "nocolon" is not provider:model`},
		{line: "model ''", name: "model", out: "Session model cleared: turns use openai:fake-model (applies from the next turn)."},
		{line: "model", name: "model", out: "Session model: openai:fake-model"},
		{line: "model model_id=openai:other-model", name: "model", out: "Session model set to openai:other-model (applies from the next turn)."},
		{line: "code_mode enable=true", name: "code_mode", out: "Session code mode enabled (applies from the next turn)."},
		{line: "code_mode enable=maybe", name: "code_mode", err: `code_mode: enable must be true or false, got "maybe"`},
	}
	for _, tt := range tests {
		out, err := f.agent.Command(t.Context(), f.conn, tt.line)
		if tt.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("Command(%q) = %q, %v; want error %q", tt.line, out, err, tt.err)
			}
			continue
		}
		if err != nil || out != tt.out {
			t.Errorf("Command(%q) = %q, %v; want %q", tt.line, out, err, tt.out)
		}
	}
	if _, err := f.agent.Command(t.Context(), f.conn, "quit"); !errors.Is(err, agent.ErrQuit) {
		t.Errorf("quit: %v", err)
	}
	if b, _ := os.ReadFile(f.path("c.txt")); string(b) != "a b" {
		t.Errorf("c.txt = %q", b)
	}
	sess, _ := f.app.Session(f.conn)
	if s := sess.Settings(); s.Model != "openai:other-model" || s.CodeMode == nil || !*s.CodeMode {
		t.Errorf("settings = %+v", s)
	}
	if got := f.agent.ModelFor(f.conn); got != "openai:other-model" {
		t.Errorf("ModelFor = %q", got)
	}
	out, err := f.agent.Command(t.Context(), f.conn, "tools")
	if err != nil || !strings.Contains(out, "fs.read") || !strings.Contains(out, "agent_run     (not for the model)  Run one turn") {
		t.Errorf(",tools = %q, %v", out, err)
	}

	// Every command is on the tape.
	var got []map[string]any
	for _, e := range sess.Tape().Entries() {
		if e.Kind == sessions.KindEvent && e.Payload["name"] == "command" {
			d := e.Payload["data"].(map[string]any)
			got = append(got, map[string]any{"raw": d["raw"], "name": d["name"], "status": d["status"]})
		}
	}
	var want []map[string]any
	for _, tt := range tests {
		status := "ok"
		if tt.err != "" {
			status = "error"
		}
		want = append(want, map[string]any{"raw": tt.line, "name": tt.name, "status": status})
	}
	want = append(want,
		map[string]any{"raw": "quit", "name": "quit", "status": "ok"},
		map[string]any{"raw": "tools", "name": "tools", "status": "ok"},
	)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("command events (-want +got):\n%s", diff)
	}
}

func TestREPLWithoutModel(t *testing.T) {
	f := newFixture(t, fixtureOpts{url: "http://127.0.0.1:1"})
	a := agent.New(f.app, &agent.Options{})
	var out, errOut strings.Builder
	in := strings.NewReader("hello\n,fs.write path=r.txt content=repl\n,history\n,quit\nnever read\n")
	err := a.REPL(t.Context(), f.conn, agent.REPLOptions{In: in, Out: &out, Sink: &agent.TerminalRenderer{Out: &out, Err: &errOut}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f.path("r.txt")); string(b) != "repl" {
		t.Errorf("r.txt = %q", b)
	}
	if !strings.Contains(errOut.String(), "error: no model configured: set BUB_MODEL=provider:model") {
		t.Errorf("stderr = %q", errOut.String())
	}
	if !strings.Contains(out.String(), "wrote: "+f.path("r.txt")+"\nhello\n,fs.write path=r.txt content=repl\n") {
		t.Errorf("stdout = %q", out.String())
	}
}

// TestHelpListsEveryReasoningEffort: ,help named only low, medium and high
// while ,reasoning_effort accepts every level the model package knows.
func TestHelpListsEveryReasoningEffort(t *testing.T) {
	help := agent.Help(",")
	line := help[strings.Index(help, ",reasoning_effort"):]
	line = line[:strings.Index(line, "\n  ,")]
	for _, level := range model.ReasoningEfforts {
		if !strings.Contains(line, level) {
			t.Errorf("the ,reasoning_effort help does not name %q:\n%s", level, line)
		}
	}
}
