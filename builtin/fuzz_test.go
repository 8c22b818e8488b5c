package builtin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// fuzzTools are the builtin tools FuzzToolArgs calls: those whose effects
// stay in the fixture's confined workspace and its session. bash would run
// what the fuzzer writes, and web.fetch would reach out.
var fuzzTools = []string{
	"fs.read", "fs.glob", "fs.grep", "fs.write", "fs.edit",
	"tape.search", "tape.info", "tape.anchors", "tape.handoff", "spill.read",
	"bash.output", "bash.input", "bash.kill",
}

// FuzzToolArgs calls a builtin tool with arbitrary arguments, as a model
// may send them: bad input gets an error result, never a panic (which
// the executor would turn into one, hiding the bug).
func FuzzToolArgs(f *testing.F) {
	for i, args := range []string{
		`{}`, `null`, `[]`, `"x"`, `{"path":"a.txt"}`, `{"path":"a.txt","offset":-1,"limit":0}`,
		`{"path":"a.txt","offset":99999999999999999999}`, `{"pattern":"**/*"}`, `{"pattern":"[","path":"sub"}`,
		`{"pattern":"(","path":"a.txt"}`, `{"pattern":"a","glob":"[","context":-3}`,
		`{"path":"new/b.txt","content":"x"}`, `{"path":"../escape","content":"x"}`, `{"path":"/etc/passwd"}`,
		`{"path":"a.txt","old":"","new":"y"}`, `{"path":"a.txt","old":"hello","new":"y","start_line":-5,"expected_replacements":0}`,
		`{"query":"(","limit":-1}`, `{"name":""}`, `{"name":"x","summary":"` + strings.Repeat("s", 300) + `"}`,
		`{"ref":"nope","offset":-1}`, `{"shell_id":"bash-00000000"}`, `{"shell_id":"bash-1","text":"x","close_stdin":true}`,
	} {
		f.Add(uint8(i), args)
	}
	ws := f.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	for name, content := range map[string]string{"a.txt": "hello\nworld\n", "sub/c.go": "package c\n", "bin.dat": "a\x00b"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	// Confined, so no path the fuzzer writes ("/b.txt", "../x") leaves
	// the workspace: unconfined, the file tools reach the whole host.
	env, err := environment.NewLocal(&environment.LocalOptions{Workspace: ws, Confine: true})
	if err != nil {
		f.Fatal(err)
	}
	fx := newEnvFixture(f, &Module{}, env)
	f.Fuzz(func(t *testing.T, which uint8, args string) {
		tool := fuzzTools[int(which)%len(fuzzTools)]
		tc := &registry.ToolContext{Session: fx.sess, Env: fx.env, Conn: &registry.Connection{SessionKey: "test"}}
		res := fx.exec.Call(t.Context(), registry.Call{Tool: tool, Args: json.RawMessage(args), Context: tc})
		if res.Err != nil {
			if detail, _ := res.Err.Details["error"].(string); strings.HasPrefix(detail, "panic:") {
				t.Fatalf("%s(%.300s) panicked: %s", tool, args, detail)
			}
		}
	})
}
