package builtin

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestOutputBufferDropsOldest(t *testing.T) {
	b := newOutputBuffer(16)
	b.write("0123456789")
	b.write("abcdefghij") // 20 > 16: drop down to 12 bytes kept
	text, next, total := b.read(0, -1)
	if want := droppedMarker(8) + "89abcdefghij"; text != want || next != 20 || total != 20 {
		t.Errorf("read(0) = %q, %d, %d; want %q, 20, 20", text, next, total, want)
	}
	tests := []struct {
		off, limit int64
		want       string
		next       int64
	}{
		{8, 2, "89", 10},
		{10, -1, "abcdefghij", 20},
		{3, 2, droppedMarker(8) + "89", 10},
		{20, -1, "", 20},
		{99, 5, "", 20},
		{18, 0, "", 18},
		{12, math.MaxInt64, "cdefghij", 20},
	}
	for _, tt := range tests {
		text, next, _ := b.read(tt.off, tt.limit)
		if text != tt.want || next != tt.next {
			t.Errorf("read(%d, %d) = %q, %d; want %q, %d", tt.off, tt.limit, text, next, tt.want, tt.next)
		}
	}
	if got, pos := b.tail(15, 100); got != "fghij" || pos != 20 {
		t.Errorf("tail(15) = %q, %d", got, pos)
	}
	if got, _ := b.tail(0, 3); got != "hij" {
		t.Errorf("tail(0, 3) = %q", got)
	}
}

func TestOutputBufferCountsCharacters(t *testing.T) {
	b := newOutputBuffer(1 << 10)
	b.write("héllo ✓ wörld")
	text, next, total := b.read(6, 3)
	if text != "✓ w" || next != 9 || total != 13 {
		t.Errorf("read(6, 3) = %q, %d, %d; want %q, 9, 13", text, next, total, "✓ w")
	}
	// Dropping never splits a character.
	b = newOutputBuffer(8)
	b.write(strings.Repeat("é", 6)) // 12 bytes > 8
	text, _, _ = b.read(0, -1)
	if kept := strings.TrimPrefix(text, droppedMarker(6)); kept != "ééé" {
		t.Errorf("after drop: %q", text)
	}
}

func TestUTF8Decoder(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"split character", []string{"h\xc3", "\xa9llo"}, []string{"h", "éllo", ""}},
		{"split 4-byte", []string{"\xf0\x9f", "\x98", "\x80!"}, []string{"", "", "😀!", ""}},
		{"invalid byte", []string{"a\xffb"}, []string{"a\uFFFDb", ""}},
		{"truncated at end", []string{"ok\xe2\x9c"}, []string{"ok", "\uFFFD"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d utf8Decoder
			var got []string
			for _, c := range tt.chunks {
				got = append(got, d.decode([]byte(c)))
			}
			got = append(got, d.flush())
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzUTF8Decoder checks that decoding in two reads, split anywhere,
// always yields valid UTF-8, and yields valid input unchanged.
func FuzzUTF8Decoder(f *testing.F) {
	f.Add([]byte("héllo ✓"), uint(2))
	f.Add([]byte("a\xffb\xe2\x9c"), uint(3))
	f.Add([]byte("😀"), uint(1))
	f.Fuzz(func(t *testing.T, data []byte, split uint) {
		at := int(split % uint(len(data)+1))
		var d utf8Decoder
		got := d.decode(append([]byte(nil), data[:at]...)) + d.decode(append([]byte(nil), data[at:]...)) + d.flush()
		if !utf8.ValidString(got) {
			t.Fatalf("decode(%q split at %d) = %q: not valid UTF-8", data, at, got)
		}
		if utf8.Valid(data) && got != string(data) {
			t.Fatalf("decode(%q split at %d) = %q; want it unchanged", data, at, got)
		}
	})
}
