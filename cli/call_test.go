package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// runCLI runs the command line with a temporary $BUB_HOME and returns the
// exit status and both streams.
func runCLI(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	return runCLIEnv(t, map[string]string{"BUB_HOME": home}, args...)
}

// runCLIEnv is runCLI with the given environment variables.
func runCLIEnv(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return vars[k] }}
	code := Run(t.Context(), env, args)
	return code, stdout.String(), stderr.String()
}

func TestToolsListsBuiltins(t *testing.T) {
	code, out, errOut := runCLI(t, t.TempDir(), "tools")
	if code != 0 {
		t.Fatalf("tools exit %d: %s", code, errOut)
	}
	for _, name := range []string{"bash", "bash.output", "bash.kill", "fs.read", "fs.write", "fs.edit", "spill.read",
		"tape.info", "tape.search", "tape.anchors", "tape.handoff", "tape.reset", "web.fetch", "skill"} {
		if !strings.Contains(out, "\n"+name+" ") {
			t.Errorf("tools output lacks %s:\n%s", name, out)
		}
	}
}

func TestCall(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("# Title\nbody\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		code    int
		stdout  string
		stderr  string // substring
		checkFn func(t *testing.T)
	}{
		{name: "keyword", args: []string{"fs.read", "path=README.md"}, stdout: "# Title\nbody\n"},
		{name: "positional and lax ints", args: []string{"fs.read", "README.md", "offset=1", "limit=1"}, stdout: "body\n"},
		{name: "comma prefix", args: []string{",fs.read", "path=README.md", "limit=1"}, stdout: "# Title\n"},
		{name: "one quoted line", args: []string{`fs.write path='my notes.txt' content="a b"`}, stdout: "wrote: " + filepath.Join(ws, "my notes.txt") + "\n",
			checkFn: func(t *testing.T) {
				if b, _ := os.ReadFile(filepath.Join(ws, "my notes.txt")); string(b) != "a b" {
					t.Errorf("file = %q", b)
				}
			}},
		{name: "json", args: []string{"--json", "fs.read", "path=README.md", "limit=1"},
			stdout: "{\n  \"path\": \"" + filepath.Join(ws, "README.md") + "\",\n  \"offset\": 0,\n  \"lines\": 1,\n  \"eof\": false,\n  \"content\": \"# Title\"\n}\n"},
		{name: "model name works too", args: []string{"bash", "command=echo hi"}, stdout: "hi\n"},
		{name: "tool error", args: []string{"bash", "command=echo bad; exit 4"}, code: 1,
			stderr: "[tool] command exited with code 4\noutput:\nbad\n{\n  \"exit_code\": 4,\n  \"output\": \"bad\\n\"\n}\n"},
		{name: "missing file", args: []string{"fs.read", "path=nope"}, code: 1, stderr: "[not_found] no such file"},
		{name: "validation", args: []string{"fs.read", "path=README.md", "offset=x"}, code: 1, stderr: "[invalid_input] Tool 'fs.read' argument validation failed."},
		{name: "unknown tool", args: []string{"fs.raed", "path=x"}, code: 1, stderr: "[not_found] unknown tool name(s): 'fs.raed' (did you mean 'fs.read'"},
		{name: "positional after keyword", args: []string{"fs.read", "path=README.md", "extra"}, code: 2,
			stderr: "positional argument 'extra' cannot appear after keyword arguments"},
		{name: "too many positional", args: []string{"tape.info", "x"}, code: 2, stderr: "tape.info takes at most 0 positional arguments"},
		{name: "duplicate argument", args: []string{"fs.read", "README.md", "path=x"}, code: 2, stderr: "fs.read got multiple values for argument 'path'"},
		{name: "bad quoting", args: []string{`fs.read path='README.md`}, code: 2, stderr: "no closing quotation"},
		{name: "empty", args: []string{}, code: 2, stderr: "empty command"},
		{name: "flag after tool", args: []string{"fs.read", "path=README.md", "limit=1", "--json"},
			stdout: "{\n  \"path\": \"" + filepath.Join(ws, "README.md") + "\",\n  \"offset\": 0,\n  \"lines\": 1,\n  \"eof\": false,\n  \"content\": \"# Title\"\n}\n"},
		{name: "unknown flag after tool", args: []string{"fs.read", "path=README.md", "--jsno"}, code: 2, stderr: "unknown flag: --jsno"},
		{name: "dash word after --", args: []string{"bash", "--", "command=echo -n x"}, stdout: "x\n"},
		{name: "unknown profile", args: []string{"--profile", "nope", "tape.info"}, code: 2, stderr: "unknown profile \"nope\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"call", "--workspace", ws}, tt.args...)
			code, out, errOut := runCLI(t, home, args...)
			if code != tt.code {
				t.Fatalf("exit %d; want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			if tt.code == 0 && out != tt.stdout {
				t.Errorf("stdout = %q; want %q", out, tt.stdout)
			}
			if !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr = %q; want it to contain %q", errOut, tt.stderr)
			}
			if tt.checkFn != nil {
				tt.checkFn(t)
			}
		})
	}
}

func TestCallSessions(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	call := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, home, append([]string{"call", "--workspace", ws}, args...)...)
		if code != 0 {
			t.Fatalf("call %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	call("--session", "s1", "tape.handoff", "name=phase-1")
	if got := call("--session", "s1", "tape.anchors"); got != "- phase-1\n" {
		t.Errorf("s1 anchors = %q", got)
	}
	if got := call("--session", "s2", "tape.anchors"); got != "(no anchors)\n" {
		t.Errorf("s2 anchors = %q; sessions must not share tapes", got)
	}
	if got := call("tape.anchors"); got != "(no anchors)\n" {
		t.Errorf("default session anchors = %q", got)
	}

	// A profile names its own session.
	if err := os.WriteFile(filepath.Join(home, "bub.toml"), []byte("[profiles.ops]\nsession = \"s1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := call("--profile", "ops", "tape.anchors"); got != "- phase-1\n" {
		t.Errorf("--profile ops anchors = %q; want the s1 session's", got)
	}
}

func TestCallConfiguresWebFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 100)))
	}))
	defer srv.Close()
	home, ws := t.TempDir(), t.TempDir()
	fetch := func(vars map[string]string) (int, string, string) {
		vars["BUB_HOME"] = home
		return runCLIEnv(t, vars, "call", "--workspace", ws, "web.fetch", "url="+srv.URL)
	}
	if code, _, errOut := fetch(map[string]string{}); code != 1 || !strings.Contains(errOut, "loopback") {
		t.Errorf("web.fetch of loopback = %d %q; want it refused by default", code, errOut)
	}
	if code, out, errOut := fetch(map[string]string{"BUB_WEB_ALLOW_LOOPBACK": "true"}); code != 0 || out != strings.Repeat("x", 100)+"\n" {
		t.Errorf("web.fetch with BUB_WEB_ALLOW_LOOPBACK=true = %d %q %q", code, out, errOut)
	}
	if err := os.WriteFile(filepath.Join(home, "bub.toml"), []byte("[web]\nallow_loopback = true\nmax_bytes = 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := fetch(map[string]string{}); code != 1 || !strings.Contains(errOut, "larger than 50 bytes") {
		t.Errorf("web.fetch over [web] max_bytes = %d %q; want the configured cap", code, errOut)
	}
	if code, _, errOut := fetch(map[string]string{"BUB_WEB_ALLOW_LOOPBACK": "maybe"}); code != 1 || !strings.Contains(errOut, "BUB_WEB_ALLOW_LOOPBACK") {
		t.Errorf("bad BUB_WEB_ALLOW_LOOPBACK = %d %q", code, errOut)
	}
}

func TestCommandArgs(t *testing.T) {
	tool := registry.MustNewTool("t.args", "", func(ctx context.Context, tc *registry.ToolContext, in struct {
		A string `json:"a"`
		B int    `json:"b,omitempty"`
	}) (string, error) {
		return "", nil
	})
	tests := []struct {
		words []string
		want  map[string]any
		err   string
	}{
		{nil, map[string]any{}, ""},
		{[]string{"x", "2"}, map[string]any{"a": "x", "b": "2"}, ""},
		{[]string{"x", "b=2"}, map[string]any{"a": "x", "b": "2"}, ""},
		{[]string{"a=k=v"}, map[string]any{"a": "k=v"}, ""},
		{[]string{"a="}, map[string]any{"a": ""}, ""},
		{[]string{"=x"}, map[string]any{"a": "=x"}, ""},
		{[]string{"a=1", "x"}, nil, "positional argument 'x' cannot appear after keyword arguments"},
		{[]string{"x", "y", "z"}, nil, "t.args takes at most 2 positional arguments (a, b), got 3"},
		{[]string{"x", "a=y"}, nil, "t.args got multiple values for argument 'a'"},
	}
	for _, tt := range tests {
		raw, err := commandArgs(tool, tt.words)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("commandArgs(%q) error = %v; want %q", tt.words, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("commandArgs(%q): %v", tt.words, err)
			continue
		}
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("commandArgs(%q) (-want +got):\n%s", tt.words, diff)
		}
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{`fs.read path=README.md`, []string{"fs.read", "path=README.md"}, false},
		{`  a   b  `, []string{"a", "b"}, false},
		{`bash command='ls -la; echo "x"'`, []string{"bash", `command=ls -la; echo "x"`}, false},
		{`a "b \"c\" \$d \n"`, []string{"a", `b "c" $d \n`}, false},
		{`a\ b c`, []string{"a b", "c"}, false},
		{`x='' y=""`, []string{"x=", "y="}, false},
		{`''`, []string{""}, false},
		{`a 'b`, nil, true},
		{`a "b`, nil, true},
		{`a \`, nil, true},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("splitWords(%q) error = %v; want error %v", tt.in, err, tt.err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); !tt.err && diff != "" {
			t.Errorf("splitWords(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// FuzzSplitWords checks that splitting never panics and that words
// quoted back and joined split into the same words.
func FuzzSplitWords(f *testing.F) {
	f.Add(`fs.read path='a b' "c\"d" e\ f`)
	f.Add(`'`)
	f.Add(`a\`)
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err != nil {
			return
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		again, err := splitWords(strings.Join(quoted, " "))
		if err != nil {
			t.Fatalf("re-split of %q: %v", quoted, err)
		}
		if len(words) == 0 {
			words = nil
		}
		if diff := cmp.Diff(words, again); diff != "" {
			t.Fatalf("splitWords(%q) round trip (-first +again):\n%s", s, diff)
		}
	})
}

// A one-shot call of a builtin tool starts no upstream server (the App
// that call builds is on demand). The upstream here records its own start
// in a file; the call's bash looks for that file for 3 s, far longer than
// a start takes, so a call that had started it would see it.
func TestCallStartsNoUpstream(t *testing.T) {
	testenv.MustHaveExec(t, "sh", "apt-get install dash")
	home, ws := t.TempDir(), t.TempDir()
	marker := filepath.Join(t.TempDir(), "started")
	mcpJSON := fmt.Sprintf(`{"mcpServers": {"rec": {"command": "sh", "args": ["-c", "touch %s; exec cat >/dev/null"]}}}`, marker)
	if err := os.WriteFile(filepath.Join(home, "mcp.json"), []byte(mcpJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	look := fmt.Sprintf("command=for i in $(seq 30); do [ -e %s ] && { echo started; exit 0; }; sleep 0.1; done; echo never", marker)
	code, out, errOut := runCLI(t, home, "call", "--workspace", ws, "bash", look)
	if code != 0 || !strings.Contains(out, "never") {
		t.Errorf("call bash: exit %d, stdout %q, stderr %q; want the upstream never started", code, out, errOut)
	}
}
