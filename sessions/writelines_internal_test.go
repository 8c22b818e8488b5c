package sessions

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// writeLines writes every line whole and in order: one line, a batch
// longer than one writev may carry (IOV_MAX), empty lines, and a large
// line among small ones, after what the file already holds.
func TestWriteLines(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 3<<20)
	for _, n := range []int{1, 3, 1024, 1025, 3000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tape.jsonl")
			if err := os.WriteFile(path, []byte("head\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var lines []Line
			want := []byte("head\n")
			for i := range n {
				text := fmt.Appendf(nil, "line %d\n", i)
				switch {
				case i == n/2:
					text = append(append([]byte(nil), big...), '\n')
				case i%7 == 3:
					text = nil
				}
				lines = append(lines, Line{Text: text})
				want = append(want, text...)
			}
			if err := writeLines(f, lines); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("file holds %d bytes; want %d, the lines in order", len(got), len(want))
			}
		})
	}
}

// chunkDraft's tape lines are the bytes makeDraft's would be: HTML
// characters, control characters, line separators, invalid UTF-8 and
// plain text alike, with ids of every width, built twice as a retried
// transaction builds them.
func TestChunkDraftMatchesMakeDraft(t *testing.T) {
	for _, c := range []string{"", "plain", "<a href=\"x\">&amp;</a>", "tab\tnl\nnul\x00 \x1f", "\u2028\u2029 é 漢字 🙂", "bad \xff\xfe utf-8", `back\slash "quote"`} {
		meta := map[string]any{"spill_handle": "h", "spill_chunk": 3}
		want, err := makeDraft(KindToolResult, map[string]any{"results": []string{c}}, meta)
		if err != nil {
			t.Fatal(err)
		}
		got, err := chunkDraft(c, meta)
		if err != nil {
			t.Fatal(err)
		}
		want.date = got.date
		for _, last := range []int{0, 8, 98, 1 << 40, 8, math.MaxInt - 1} {
			g, _ := encodeDrafts(last, nil, []draft{got})
			w, _ := encodeDrafts(last, nil, []draft{want})
			if !bytes.Equal(g[0].Text, w[0].Text) {
				t.Errorf("chunkDraft(%q) after id %d:\n%s\nwant\n%s", c, last, g[0].Text, w[0].Text)
			}
		}
	}
}

// AppendString writes the bytes encoding/json writes for a string with
// HTML escaping off, on every byte sequence: each byte value alone and in
// runs, the JSONP separators, invalid and truncated UTF-8, random bytes.
func TestAppendStringMatchesEncoder(t *testing.T) {
	inputs := []string{"", "plain", "\u2028\u2029", "\xff", "\xe2\x80", "é漢🙂", "<>&", "\x7f"}
	for b := range 256 {
		inputs = append(inputs, string([]byte{byte(b)}), "a"+string([]byte{byte(b), byte(b)})+"z")
	}
	r := uint64(1)
	for range 2000 {
		n := int(r % 40)
		buf := make([]byte, n)
		for i := range buf {
			r = r*6364136223846793005 + 1442695040888963407
			buf[i] = byte(r >> 56)
		}
		inputs = append(inputs, string(buf))
	}
	for _, s := range inputs {
		want, err := marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("AppendString(%q) = %q; want %q", s, got[1:], want)
		}
	}
}
