package sessions

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// bigText is 200 000 characters of mixed 1-, 2-, 3- and 4-byte UTF-8, so
// 16 KiB chunk boundaries land inside characters.
func bigText() string {
	unit := []rune("ab é日🎉\n")
	var b strings.Builder
	for i := 0; i < 200000; i++ {
		b.WriteRune(unit[i%len(unit)])
	}
	return b.String()
}

func TestSpillRoundTrip(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	s := openStore(t, home, nil)
	sess := session(t, s, ws, "spill")
	text := bigText()
	ref, err := sess.Spill("bash", text)
	if err != nil {
		t.Fatalf("Spill() error: %v", err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$`).MatchString(ref.Handle) {
		t.Errorf("handle %q is not a uuid4 hex", ref.Handle)
	}
	wantRef := SpillRef{Handle: ref.Handle, Bytes: len(text), Chunks: ref.Chunks, Chars: 200000, Lines: strings.Count(text, "\n") + 1}
	if diff := cmp.Diff(wantRef, ref); diff != "" {
		t.Errorf("SpillRef (-want +got):\n%s", diff)
	}
	if min := (len(text) + SpillChunkBytes - 1) / SpillChunkBytes; ref.Chunks < min || ref.Chunks > min+1 {
		t.Errorf("Chunks = %d; want about %d", ref.Chunks, min)
	}

	read := func(sess *Session, fromEnd bool) string {
		var parts []string
		for cursor := 0; ; {
			page, err := sess.ReadSpill(ref.Handle, cursor, 4, fromEnd)
			if err != nil {
				t.Fatalf("ReadSpill(cursor=%d, fromEnd=%v) error: %v", cursor, fromEnd, err)
			}
			if !utf8.ValidString(page.Content) {
				t.Fatalf("page at cursor %d is not valid UTF-8", cursor)
			}
			if fromEnd {
				parts = append([]string{page.Content}, parts...)
			} else {
				parts = append(parts, page.Content)
			}
			cursor = page.NextCursor
			if page.Complete {
				return strings.Join(parts, "")
			}
		}
	}
	if got := read(sess, false); got != text {
		t.Errorf("forward read differs from the original (len %d vs %d)", len(got), len(text))
	}
	if got := read(sess, true); got != text {
		t.Errorf("backward read differs from the original (len %d vs %d)", len(got), len(text))
	}

	// Every stored chunk is at most 16 KiB, cut on a character boundary,
	// and at least one cut had to move back.
	moved := false
	for i := range ref.Chunks {
		page, err := sess.ReadSpill(ref.Handle, i, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Content) > SpillChunkBytes || !utf8.ValidString(page.Content) {
			t.Errorf("chunk %d: %d bytes, valid UTF-8 %v", i, len(page.Content), utf8.ValidString(page.Content))
		}
		if i < ref.Chunks-1 && len(page.Content) < SpillChunkBytes {
			moved = true
		}
	}
	if !moved {
		t.Errorf("no chunk boundary fell inside a character; the test text is not exercising UTF-8 safety")
	}

	// The main tape records the spill out of context.
	var writes []Entry
	for _, e := range sess.Tape().Entries() {
		if e.Payload["name"] == "spill.write" {
			writes = append(writes, e)
		}
	}
	wantWrite := []Entry{{ID: 1, Kind: KindEvent, Meta: map[string]any{"context": false},
		Payload: eventPayload("spill.write", map[string]any{"status": "ok", "handle": ref.Handle, "bytes": float64(len(text)), "chunks": float64(ref.Chunks), "tool": "bash"})}}
	if diff := cmp.Diff(wantWrite, writes, ignoreDate); diff != "" {
		t.Errorf("spill.write events (-want +got):\n%s", diff)
	}
	if n := len(sess.Tape().ContextEntries()); n != 0 {
		t.Errorf("ContextEntries() has %d entries; want 0", n)
	}

	// The sidecar file follows Bub's layout.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lines := fileLines(t, filepath.Join(home, "tapes", sess.Tape().Name()+"__sidecar__spill.jsonl"))
	if len(lines) != 2*ref.Chunks+2 {
		t.Fatalf("sidecar has %d lines; want %d", len(lines), 2*ref.Chunks+2)
	}
	first, _ := parseLine([]byte(lines[0]))
	second, _ := parseLine([]byte(lines[1]))
	last, _ := parseLine([]byte(lines[len(lines)-1]))
	if first.Payload["name"] != "spill/"+ref.Handle+"/chunk/0" || second.Kind != KindToolResult ||
		second.Meta["spill_chunk"] != float64(0) || second.Meta["spill_handle"] != ref.Handle {
		t.Errorf("first chunk entries = %+v, %+v", first, second.Meta)
	}
	wantManifest := eventPayload("spill.manifest", map[string]any{"handle": ref.Handle, "chunks": float64(ref.Chunks),
		"bytes": float64(ref.Bytes), "chars": float64(ref.Chars), "lines": float64(ref.Lines), "tool": "bash"})
	if diff := cmp.Diff(wantManifest, last.Payload); diff != "" {
		t.Errorf("manifest (-want +got):\n%s", diff)
	}

	// After a restart the spill is read back from disk.
	s2 := openStore(t, home, nil)
	if got := read(session(t, s2, ws, "spill"), false); got != text {
		t.Errorf("read after restart differs from the original")
	}
}

func TestReadSpillPages(t *testing.T) {
	s := openStore(t, t.TempDir(), nil)
	sess := session(t, s, t.TempDir(), "pages")
	// Five chunks of distinct letters.
	var b strings.Builder
	for _, c := range "abcde" {
		b.WriteString(strings.Repeat(string(c), SpillChunkBytes))
	}
	ref, err := sess.Spill("fs.read", b.String())
	if err != nil {
		t.Fatal(err)
	}
	if ref.Chunks != 5 {
		t.Fatalf("Chunks = %d; want 5", ref.Chunks)
	}
	chunk := func(s string) string {
		var out strings.Builder
		for _, c := range s {
			out.WriteString(strings.Repeat(string(c), SpillChunkBytes))
		}
		return out.String()
	}
	tests := []struct {
		cursor, count int
		fromEnd       bool
		want          SpillPage
	}{
		{0, 1, false, SpillPage{First: 0, Last: 0, NextCursor: 1, Complete: false, Content: chunk("a")}},
		{1, 2, false, SpillPage{First: 1, Last: 2, NextCursor: 3, Complete: false, Content: chunk("bc")}},
		{3, 9, false, SpillPage{First: 3, Last: 4, NextCursor: 5, Complete: true, Content: chunk("de")}},
		{0, 9, false, SpillPage{First: 0, Last: 3, NextCursor: 4, Complete: false, Content: chunk("abcd")}}, // capped at 4
		{5, 1, false, SpillPage{First: -1, Last: -1, NextCursor: 5, Complete: true}},
		{9, 1, false, SpillPage{First: -1, Last: -1, NextCursor: 5, Complete: true}},
		{0, 1, true, SpillPage{First: 4, Last: 4, NextCursor: 1, Complete: false, Content: chunk("e")}},
		{1, 2, true, SpillPage{First: 2, Last: 3, NextCursor: 3, Complete: false, Content: chunk("cd")}},
		{3, 4, true, SpillPage{First: 0, Last: 1, NextCursor: 5, Complete: true, Content: chunk("ab")}},
		{5, 1, true, SpillPage{First: -1, Last: -1, NextCursor: 5, Complete: true}},
	}
	for _, tc := range tests {
		got, err := sess.ReadSpill(ref.Handle, tc.cursor, tc.count, tc.fromEnd)
		if err != nil {
			t.Errorf("ReadSpill(%d, %d, %v) error: %v", tc.cursor, tc.count, tc.fromEnd, err)
			continue
		}
		tc.want.Handle, tc.want.Bytes, tc.want.Chunks = ref.Handle, 5*SpillChunkBytes, 5
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ReadSpill(%d, %d, %v) (-want +got):\n%s", tc.cursor, tc.count, tc.fromEnd, diff)
		}
	}
}

func TestReadSpillErrors(t *testing.T) {
	s := openStore(t, t.TempDir(), nil)
	sess := session(t, s, t.TempDir(), "errors")
	ref, err := sess.Spill("bash", strings.Repeat("z", 40000))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		handle        string
		cursor, count int
		wantIs        error
		wantMsg       string
	}{
		{"negative cursor", ref.Handle, -1, 1, ErrSpillCursor, "`cursor` must be >= 0."},
		{"zero count", ref.Handle, 0, 0, ErrSpillCount, "`count` must be >= 1."},
		{"unknown handle", "deadbeef", 0, 1, ErrNoSpill, "[no spilled tool result for handle 'deadbeef']"},
		{"handle with a quote", "it's", 0, 1, ErrNoSpill, `[no spilled tool result for handle "it's"]`},
		{"empty handle", "", 0, 1, ErrNoSpill, "[no spilled tool result for handle '']"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sess.ReadSpill(tc.handle, tc.cursor, tc.count, false)
			if !errors.Is(err, tc.wantIs) {
				t.Errorf("ReadSpill error = %v; want %v", err, tc.wantIs)
			}
			if err == nil || err.Error() != tc.wantMsg {
				t.Errorf("ReadSpill error message = %v; want %q", err, tc.wantMsg)
			}
		})
	}
}

func TestReadSpillIncomplete(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	name := TapeName(resolveWorkspace(ws), "broken")
	manifest := func(h string, chunks int) []Entry {
		return []Entry{
			{Kind: KindAnchor, Payload: map[string]any{"name": "spill/" + h + "/manifest"}},
			{Kind: KindEvent, Payload: eventPayload("spill.manifest", map[string]any{"handle": h, "chunks": chunks, "bytes": 10, "chars": 10, "lines": 1, "tool": "bash"})},
		}
	}
	chunk := func(h string, i int, meta map[string]any, results []any) []Entry {
		return []Entry{
			{Kind: KindAnchor, Payload: map[string]any{"name": chunkAnchor(h, i)}},
			{Kind: KindToolResult, Payload: map[string]any{"results": results}, Meta: meta},
		}
	}
	var entries []Entry
	// "nochunks": manifest only.
	entries = append(entries, manifest("nochunks", 2)...)
	// "wrongmeta": chunk index mismatch.
	entries = append(entries, chunk("wrongmeta", 0, map[string]any{"spill_handle": "wrongmeta", "spill_chunk": 5}, []any{"x"})...)
	entries = append(entries, manifest("wrongmeta", 1)...)
	// "badresults": two results.
	entries = append(entries, chunk("badresults", 0, map[string]any{"spill_handle": "badresults", "spill_chunk": 0}, []any{"x", "y"})...)
	entries = append(entries, manifest("badresults", 1)...)
	// "badmanifest": negative chunk count is treated as no spill.
	entries = append(entries, manifest("badmanifest", -1)...)
	// "short": chunk 0 present, chunk 1 missing, read of both. It comes
	// last: like Bub, the read takes the next tool_result entries after the
	// chunk anchor, whichever spill they belong to.
	entries = append(entries, chunk("short", 0, map[string]any{"spill_handle": "short", "spill_chunk": 0}, []any{"x"})...)
	entries = append(entries, manifest("short", 2)...)
	for i := range entries {
		entries[i].ID = i + 1
		entries[i].Date = day(1)
	}
	path := filepath.Join(home, "tapes", name+"__sidecar__spill.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for _, e := range entries {
		buf = append(buf, entryLine(t, e)...)
	}
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, home, nil)
	sess := session(t, s, ws, "broken")
	tests := []struct {
		handle  string
		count   int
		wantIs  error
		wantMsg string
	}{
		{"nochunks", 1, ErrIncompleteSpill, "[incomplete spilled tool result: missing chunk 0 for handle 'nochunks']"},
		{"short", 2, ErrIncompleteSpill, "[incomplete spilled tool result: missing chunks for handle 'short']"},
		{"wrongmeta", 1, ErrIncompleteSpill, "[incomplete spilled tool result: invalid chunk 0 for handle 'wrongmeta']"},
		{"badresults", 1, ErrIncompleteSpill, "[incomplete spilled tool result: invalid chunk 0 for handle 'badresults']"},
		{"badmanifest", 1, ErrNoSpill, "[no spilled tool result for handle 'badmanifest']"},
	}
	for _, tc := range tests {
		_, err := sess.ReadSpill(tc.handle, 0, tc.count, false)
		if !errors.Is(err, tc.wantIs) || err.Error() != tc.wantMsg {
			t.Errorf("ReadSpill(%q) error = %v; want %q (%v)", tc.handle, err, tc.wantMsg, tc.wantIs)
		}
	}
	if page, err := sess.ReadSpill("short", 0, 1, false); err != nil || page.Content != "x" {
		t.Errorf("ReadSpill(short, count=1) = %q, %v; want \"x\", nil", page.Content, err)
	}
}

func TestSpillFailure(t *testing.T) {
	home := t.TempDir()
	s := openStore(t, home, nil)
	sess := session(t, s, t.TempDir(), "fail")
	// A directory where the sidecar file should be makes storage fail.
	side := filepath.Join(home, "tapes", sess.Tape().Name()+"__sidecar__spill.jsonl")
	if err := os.MkdirAll(side, 0o700); err != nil {
		t.Fatal(err)
	}
	ref, err := sess.Spill("bash", "payload")
	if err == nil {
		t.Fatal("Spill() into an unwritable sidecar succeeded")
	}
	if ref.Bytes != 7 || ref.Handle == "" {
		t.Errorf("SpillRef on failure = %+v", ref)
	}
	es := sess.Tape().Entries()
	if len(es) != 1 {
		t.Fatalf("main tape has %d entries; want 1", len(es))
	}
	data := es[0].Payload["data"].(map[string]any)
	if data["status"] != "error" || data["error"] == "" || es[0].Meta["context"] != false {
		t.Errorf("spill.write on failure = %+v meta %+v", data, es[0].Meta)
	}
}

func TestHelpers(t *testing.T) {
	chunks := utf8Chunks("aé日🎉", 4)
	if diff := cmp.Diff([]string{"aé", "日", "🎉"}, chunks); diff != "" {
		t.Errorf("utf8Chunks (-want +got):\n%s", diff)
	}
	if got := utf8Chunks("", 4); got != nil {
		t.Errorf("utf8Chunks(\"\") = %q; want nil", got)
	}
}
