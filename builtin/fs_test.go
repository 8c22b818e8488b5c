package builtin

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

func TestFSRead(t *testing.T) { eachEnv(t, testFSRead) }

func testFSRead(t *testing.T, f *fixture) {
	f.write("lf.txt", "one\ntwo\nthree\n")
	f.write("crlf.txt", "one\r\ntwo\r\nthree")
	f.write("cr.txt", "one\rtwo\r\rfour")
	f.write("empty.txt", "")
	f.write("utf8.txt", "héllo\nwörld ✓\n")
	tests := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "lf.txt"}, "one\ntwo\nthree"},
		{map[string]any{"path": "lf.txt", "offset": 1}, "two\nthree"},
		{map[string]any{"path": "lf.txt", "offset": 1, "limit": 1}, "two"},
		{map[string]any{"path": "lf.txt", "limit": 0}, ""},
		{map[string]any{"path": "lf.txt", "offset": 10}, ""},
		{map[string]any{"path": "lf.txt", "limit": nil}, "one\ntwo\nthree"},
		{map[string]any{"path": filepath.Join(f.ws, "lf.txt")}, "one\ntwo\nthree"},
		{map[string]any{"path": "crlf.txt"}, "one\ntwo\nthree"},
		{map[string]any{"path": "crlf.txt", "offset": 2}, "three"},
		{map[string]any{"path": "cr.txt"}, "one\ntwo\n\nfour"},
		{map[string]any{"path": "empty.txt"}, ""},
		{map[string]any{"path": "utf8.txt", "offset": 1}, "wörld ✓"},
	}
	for _, tt := range tests {
		if got := f.ok("fs.read", tt.args); got != tt.want {
			t.Errorf("fs.read(%v) = %q; want %q", tt.args, got, tt.want)
		}
	}
	res := f.call("fs.read", map[string]any{"path": "lf.txt", "offset": 1, "limit": 1})
	want := FSReadResult{Path: filepath.Join(f.ws, "lf.txt"), Offset: 1, Lines: 1, EOF: false, Content: "two"}
	if diff := cmp.Diff(want, res.Value); diff != "" {
		t.Errorf("structured result (-want +got):\n%s", diff)
	}
}

func TestFSReadRefusesBadInput(t *testing.T) { eachEnv(t, testFSReadRefusesBadInput) }

func testFSReadRefusesBadInput(t *testing.T, f *fixture) {
	f.write("bin.dat", "abc\x00def")
	f.write("latin1.txt", "caf\xe9\n")
	f.write("ok.txt", "x\n")
	if err := os.Mkdir(filepath.Join(f.ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args     map[string]any
		kind     registry.Kind
		contains string
	}{
		{map[string]any{"path": "missing.txt"}, registry.KindNotFound, "no such file: " + filepath.Join(f.ws, "missing.txt")},
		{map[string]any{"path": "dir"}, registry.KindInvalidInput, "is a directory"},
		{map[string]any{"path": "bin.dat"}, registry.KindInvalidInput, "binary file"},
		{map[string]any{"path": "latin1.txt"}, registry.KindInvalidInput, "binary file (invalid UTF-8"},
	}
	for _, tt := range tests {
		e := f.fails("fs.read", tt.args)
		if e.Kind != tt.kind || !strings.Contains(e.Message, tt.contains) {
			t.Errorf("fs.read(%v) = %v; want [%s] containing %q", tt.args, e, tt.kind, tt.contains)
		}
		if strings.Contains(e.Message, "\x00") || strings.Contains(e.Message, "def") {
			t.Errorf("fs.read(%v) error dumps the file: %q", tt.args, e.Message)
		}
	}
}

func TestFSReadLargeFileIsPaged(t *testing.T) {
	f := newFixture(t, &environment.LocalOptions{MaxReadBytes: 1024})
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "line %d\r\n", i)
	}
	f.write("big.txt", b.String())

	// Past the environment's ReadText limit, fs.read still streams.
	res := f.call("fs.read", map[string]any{"path": "big.txt"})
	if r, _ := res.Value.(FSReadResult); res.Err != nil || r.Lines != 1000 || !r.EOF || r.Truncated != "" {
		t.Errorf("whole read of a file past MaxReadBytes = %+v %v; want all 1000 lines", r, res.Err)
	}
	res = f.call("fs.read", map[string]any{"path": "big.txt", "offset": 500, "limit": 3})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if want := "line 500\nline 501\nline 502"; res.Text != want {
		t.Errorf("paged read = %q; want %q", res.Text, want)
	}
	if r := res.Value.(FSReadResult); r.EOF || r.Lines != 3 {
		t.Errorf("paged read result = %+v; want 3 lines, not at EOF", r)
	}
	res = f.call("fs.read", map[string]any{"path": "big.txt", "offset": 999, "limit": math.MaxInt64})
	if res.Err != nil || res.Text != "line 999" {
		t.Errorf("page with a huge limit = %q %v", res.Text, res.Err)
	}
	res = f.call("fs.read", map[string]any{"path": "big.txt", "offset": 998, "limit": 10})
	if res.Err != nil || res.Text != "line 998\nline 999" || !res.Value.(FSReadResult).EOF {
		t.Errorf("last page = %q %+v %v", res.Text, res.Value, res.Err)
	}
	res = f.call("fs.read", map[string]any{"path": "big.txt", "offset": 997, "limit": 3})
	if res.Err != nil || !res.Value.(FSReadResult).EOF {
		t.Errorf("page ending at the last line = %+v %v; want EOF", res.Value, res.Err)
	}
	f.write("bigbin.dat", strings.Repeat("x", 2000)+"\x00")
	f.write("bigbin2.dat", "\x00"+strings.Repeat("x", 2000))
	for _, p := range []string{"bigbin.dat", "bigbin2.dat"} {
		if e := f.fails("fs.read", map[string]any{"path": p, "limit": 1}); !strings.Contains(e.Message, "binary") {
			t.Errorf("paged read of binary %s = %v; want it refused as binary", p, e)
		}
	}
}

func TestFSWrite(t *testing.T) { eachEnv(t, testFSWrite) }

func testFSWrite(t *testing.T, f *fixture) {
	got := f.ok("fs.write", map[string]any{"path": "a/b/c.txt", "content": "hi\n"})
	if want := "wrote: " + filepath.Join(f.ws, "a/b/c.txt"); got != want {
		t.Errorf("fs.write = %q; want %q", got, want)
	}
	if got := f.read("a/b/c.txt"); got != "hi\n" {
		t.Errorf("file = %q", got)
	}
	if err := os.Mkdir(filepath.Join(f.ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if e := f.fails("fs.write", map[string]any{"path": "d", "content": "x"}); !strings.Contains(e.Message, "is a directory") {
		t.Errorf("fs.write to a directory = %v", e)
	}
	if e := f.fails("fs.write", map[string]any{"path": "x.txt"}); e.Kind != registry.KindInvalidInput {
		t.Errorf("fs.write without content = %v", e)
	}
}

func TestFSEdit(t *testing.T) { eachEnv(t, testFSEdit) }

func testFSEdit(t *testing.T, f *fixture) {
	tests := []struct {
		name, content string
		args          map[string]any
		want          string
	}{
		{"all occurrences", "a x\nb x\n", map[string]any{"old": "x", "new": "y"}, "a y\nb y\n"},
		{"from line", "x\nx\nx\n", map[string]any{"old": "x", "new": "y", "start": 1}, "x\ny\ny\n"},
		{"multi-line old", "one\ntwo\nthree", map[string]any{"old": "one\ntwo", "new": "1-2"}, "1-2\nthree"},
		{"CRLF kept", "a\r\nb\r\n", map[string]any{"old": "b", "new": "c", "start": 1}, "a\r\nc\r\n"},
		{"no trailing newline added", "abc", map[string]any{"old": "b", "new": ""}, "ac"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := f.write("e.txt", tt.content)
			tt.args["path"] = "e.txt"
			if got := f.ok("fs.edit", tt.args); got != "edited: "+p {
				t.Errorf("fs.edit = %q; want %q", got, "edited: "+p)
			}
			if got := f.read("e.txt"); got != tt.want {
				t.Errorf("file = %q; want %q", got, tt.want)
			}
		})
	}

	p := f.write("e.txt", "x\nabc\n")
	failures := []struct {
		args    map[string]any
		kind    registry.Kind
		message string
	}{
		{map[string]any{"path": "e.txt", "old": "x", "new": "y", "start": 1}, registry.KindTool, "'x' not found in " + p + " from line 1"},
		{map[string]any{"path": "e.txt", "old": "zzz", "new": "y"}, registry.KindTool, "'zzz' not found in " + p + " from line 0"},
		{map[string]any{"path": "e.txt", "old": "", "new": "y"}, registry.KindInvalidInput, "`old` must not be empty."},
		{map[string]any{"path": "nope.txt", "old": "x", "new": "y"}, registry.KindNotFound, "no such file: " + filepath.Join(f.ws, "nope.txt")},
	}
	for _, tt := range failures {
		e := f.fails("fs.edit", tt.args)
		if e.Kind != tt.kind || e.Message != tt.message {
			t.Errorf("fs.edit(%v) = %v; want [%s] %s", tt.args, e, tt.kind, tt.message)
		}
	}
	if got := f.read("e.txt"); got != "x\nabc\n" {
		t.Errorf("a refused edit changed the file: %q", got)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "nope.txt")); !os.IsNotExist(err) {
		t.Errorf("a refused edit created the file")
	}
}

// BenchmarkFSReadPage reads the default page (2,000 lines of 100 bytes)
// of a 1 MB file through the executor.
func BenchmarkFSReadPage(b *testing.B) {
	ws := b.TempDir()
	line := strings.Repeat("x", 99) + "\n"
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat(line, 10000)), 0o644); err != nil {
		b.Fatal(err)
	}
	env, err := environment.NewLocal(&environment.LocalOptions{Workspace: ws})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	exec := newExec(b, &Module{})
	tc := &registry.ToolContext{Env: env}
	b.SetBytes(200_000)
	b.ReportAllocs()
	for b.Loop() {
		res := exec.Call(b.Context(), registry.Call{Tool: "fs.read", Args: []byte(`{"path":"big.txt"}`), Context: tc})
		if res.Err != nil || res.Value.(FSReadResult).Lines != DefaultReadLines {
			b.Fatalf("fs.read = %d bytes, %v", len(res.Text), res.Err)
		}
	}
}
