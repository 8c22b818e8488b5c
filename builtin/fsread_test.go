package builtin

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// numbered returns n lines "line 0" ... "line n-1", each ending in "\n".
func numbered(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// joined returns lines [from, to) of numbered, joined by "\n".
func joined(from, to int) string {
	var s []string
	for i := from; i < to; i++ {
		s = append(s, fmt.Sprintf("line %d", i))
	}
	return strings.Join(s, "\n")
}

func TestFSReadGuards(t *testing.T) { eachEnv(t, testFSReadGuards) }

// plainEnv hides the optional interfaces of the environment it wraps, as
// a plugin's environment without FileOpener would.
type plainEnv struct{ environment.Environment }

func TestFSReadGuardsWithoutFileOpener(t *testing.T) {
	f := newFixture(t, nil)
	f.env = plainEnv{f.env}
	testFSReadGuards(t, f)
}

func testFSReadGuards(t *testing.T, f *fixture) {
	f.write("lines.txt", numbered(2500))
	wide := strings.Repeat("x", 999)
	f.write("wide.txt", strings.Repeat(wide+"\n", 1000))
	long := strings.Repeat("é", 5000)
	f.write("long.txt", long+"\nshort\n")
	// One line of 300,000 characters (400,000 bytes): longer than a read
	// chunk, with chunk boundaries inside its two-byte runes.
	f.write("huge.txt", strings.Repeat("aé", 100_000)+"\nend")
	// A "\r\n" right at a chunk boundary, and one straddling it.
	f.write("crlf1.txt", strings.Repeat("y", readChunk-1)+"\r\nnext")
	f.write("crlf2.txt", strings.Repeat("y", readChunk)+"\r\nnext")
	abs := func(p string) string { return filepath.Join(f.ws, p) }
	cutY := strings.Repeat("y", MaxLineChars)

	tests := []struct {
		name     string
		args     map[string]any
		want     FSReadResult
		wantNote string // in the text after the content; "" means none
	}{
		{"default page", map[string]any{"path": "lines.txt"},
			FSReadResult{Path: abs("lines.txt"), Lines: 2000, Content: joined(0, 2000), Truncated: "lines", NextOffset: 2000},
			"Read on with offset=2000"},
		{"next page reaches the end", map[string]any{"path": "lines.txt", "offset": 2000},
			FSReadResult{Path: abs("lines.txt"), Offset: 2000, Lines: 500, EOF: true, Content: joined(2000, 2500)}, ""},
		{"an explicit limit beats the line guard", map[string]any{"path": "lines.txt", "limit": 2500},
			FSReadResult{Path: abs("lines.txt"), Lines: 2500, EOF: true, Content: joined(0, 2500)}, ""},
		{"an explicit limit short of the end is not truncation", map[string]any{"path": "lines.txt", "offset": 10, "limit": 5},
			FSReadResult{Path: abs("lines.txt"), Offset: 10, Lines: 5, Content: joined(10, 15)}, ""},
		{"byte guard", map[string]any{"path": "wide.txt", "limit": 1000},
			FSReadResult{Path: abs("wide.txt"), Lines: 262, Content: strings.TrimSuffix(strings.Repeat(wide+"\n", 262), "\n"), Truncated: "bytes", NextOffset: 262},
			"stopping at the 256 KiB limit; the file goes on. Read on with offset=262"},
		{"long line cut at a rune", map[string]any{"path": "long.txt"},
			FSReadResult{Path: abs("long.txt"), Lines: 2, EOF: true, CutLines: 1,
				Content: strings.Repeat("é", MaxLineChars) + "… [line cut: 3000 more characters]\nshort"},
			"1 lines longer than 2000 characters were cut"},
		{"line longer than a chunk", map[string]any{"path": "huge.txt"},
			FSReadResult{Path: abs("huge.txt"), Lines: 2, EOF: true, CutLines: 1,
				Content: strings.Repeat("aé", MaxLineChars/2) + "… [line cut: 198000 more characters]\nend"},
			"were cut"},
		{"skipping a line longer than a chunk", map[string]any{"path": "huge.txt", "offset": 1},
			FSReadResult{Path: abs("huge.txt"), Offset: 1, Lines: 1, EOF: true, Content: "end"}, ""},
		{"CRLF at a chunk boundary", map[string]any{"path": "crlf1.txt"},
			FSReadResult{Path: abs("crlf1.txt"), Lines: 2, EOF: true, CutLines: 1,
				Content: cutY + fmt.Sprintf("… [line cut: %d more characters]\nnext", readChunk-1-MaxLineChars)}, "were cut"},
		{"CRLF after a chunk", map[string]any{"path": "crlf2.txt"},
			FSReadResult{Path: abs("crlf2.txt"), Lines: 2, EOF: true, CutLines: 1,
				Content: cutY + fmt.Sprintf("… [line cut: %d more characters]\nnext", readChunk-MaxLineChars)}, "were cut"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.call("fs.read", tt.args)
			if res.Err != nil {
				t.Fatalf("fs.read(%v): %v", tt.args, res.Err)
			}
			if diff := cmp.Diff(tt.want, res.Value); diff != "" {
				t.Errorf("fs.read(%v) (-want +got):\n%s", tt.args, diff)
			}
			note, _ := strings.CutPrefix(res.Text, tt.want.Content)
			switch {
			case tt.wantNote == "" && note != "":
				t.Errorf("fs.read(%v) text adds %q; want the content alone", tt.args, note)
			case tt.wantNote != "" && !strings.Contains(note, tt.wantNote):
				t.Errorf("fs.read(%v) note = %q; want it to contain %q", tt.args, note, tt.wantNote)
			}
			if r := res.Value.(FSReadResult); len(r.Content) > MaxReadBytes {
				t.Errorf("fs.read(%v) returned %d bytes; the guard is %d", tt.args, len(r.Content), MaxReadBytes)
			}
		})
	}
	f.write("png.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	if e := f.fails("fs.read", map[string]any{"path": "png.png"}); e.Kind != registry.KindInvalidInput || !strings.Contains(e.Message, "is a binary file") || strings.Contains(e.Message, "IHDR") {
		t.Errorf("fs.read of a PNG = %v; want a binary-file message without its bytes", e)
	}
}

func TestFSReadTooLargeWithoutFileOpener(t *testing.T) {
	f := newFixture(t, &environment.LocalOptions{MaxReadBytes: 1024})
	f.env = plainEnv{f.env}
	f.write("big.txt", numbered(1000))
	e := f.fails("fs.read", map[string]any{"path": "big.txt", "limit": 1})
	if e.Kind != registry.KindInvalidInput || !strings.Contains(e.Message, "too large") || !strings.Contains(e.Message, "use bash") {
		t.Errorf("fs.read of a large file without FileOpener = %v; want too large, with advice to use bash", e)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"/a/b-c_d.txt": "/a/b-c_d.txt", "/a b": "'/a b'", "it's": `'it'\''s'`, "": "''"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q; want %q", in, got, want)
		}
	}
}
