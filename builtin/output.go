package builtin

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// DefaultOutputCap is how many bytes of output a shell keeps. Beyond it the
// oldest output is dropped, so a chatty background command cannot grow the
// server's memory without bound.
const DefaultOutputCap = 1 << 20

// outputBuffer holds a shell's merged stdout and stderr as text. Positions
// are character offsets from the start of everything the shell printed, so
// they stay valid after old output is dropped: bash.output's offset and
// next_offset use them.
type outputBuffer struct {
	mu           sync.Mutex
	buf          []byte // retained text, valid UTF-8
	chars        int64  // characters in buf
	droppedChars int64  // characters dropped from the front
	droppedBytes int64  // bytes dropped from the front
	cap          int
}

func newOutputBuffer(capacity int) *outputBuffer {
	if capacity <= 0 {
		capacity = DefaultOutputCap
	}
	return &outputBuffer{cap: capacity}
}

// write appends valid UTF-8 text. When the buffer grows past its cap, the
// oldest output is dropped down to three quarters of the cap, so appends do
// not each move the whole buffer.
func (b *outputBuffer) write(s string) {
	if s == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, s...)
	b.chars += int64(utf8.RuneCountInString(s))
	if len(b.buf) <= b.cap {
		return
	}
	cut := len(b.buf) - b.cap*3/4
	for cut < len(b.buf) && !utf8.RuneStart(b.buf[cut]) {
		cut++
	}
	n := int64(utf8.RuneCount(b.buf[:cut]))
	b.droppedChars += n
	b.droppedBytes += int64(cut)
	b.chars -= n
	b.buf = append(b.buf[:0], b.buf[cut:]...)
}

// size returns the number of bytes written so far, dropped ones included.
func (b *outputBuffer) size() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.droppedBytes + int64(len(b.buf))
}

// tail returns the text written after byte position from (as reported by
// size), at most most bytes of its end, and the new position.
func (b *outputBuffer) tail(from int64, most int) (string, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	end := b.droppedBytes + int64(len(b.buf))
	i := int(max(from-b.droppedBytes, 0))
	if len(b.buf)-i > most {
		i = len(b.buf) - most
		for i < len(b.buf) && !utf8.RuneStart(b.buf[i]) {
			i++
		}
	}
	return string(b.buf[i:]), end
}

// droppedMarker is the line that stands for output that is no longer kept.
func droppedMarker(n int64) string {
	return "[... " + strconv.FormatInt(n, 10) + " bytes dropped ...]\n"
}

// read returns the text from character offset off, at most limit
// characters (limit < 0 means to the end), the offset after it and the
// offset of the end of the output. An offset inside the dropped output
// starts at the oldest kept character, and the text begins with a marker
// saying how much was dropped.
func (b *outputBuffer) read(off, limit int64) (text string, next, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	total = b.droppedChars + b.chars
	start := min(max(off, 0), total)
	var sb strings.Builder
	if start < b.droppedChars {
		sb.WriteString(droppedMarker(b.droppedBytes))
		start = b.droppedChars
	}
	end := total
	if limit >= 0 && limit < total-start {
		end = start + limit
	}
	i := b.byteIndex(start - b.droppedChars)
	j := i + b.byteIndexFrom(i, end-start)
	sb.Write(b.buf[i:j])
	return sb.String(), end, total
}

// all returns everything kept, preceded by the dropped marker when output
// was dropped.
func (b *outputBuffer) all() string {
	text, _, _ := b.read(0, -1)
	return text
}

// byteIndex returns the byte index of character n of buf.
func (b *outputBuffer) byteIndex(n int64) int { return b.byteIndexFrom(0, n) }

// byteIndexFrom returns how many bytes the n characters starting at byte i
// of buf take.
func (b *outputBuffer) byteIndexFrom(i int, n int64) int {
	j := i
	for ; n > 0 && j < len(b.buf); n-- {
		if c := b.buf[j]; c < utf8.RuneSelf {
			j++
			continue
		}
		_, w := utf8.DecodeRune(b.buf[j:])
		j += w
	}
	return j - i
}

// utf8Decoder turns a byte stream into valid UTF-8 text: a character split
// across reads is completed by the next read, and invalid bytes become
// U+FFFD, as Python's decode(errors="replace") does.
type utf8Decoder struct {
	pending []byte // an incomplete character from the end of the last read
}

// decode returns the text of p, keeping an incomplete trailing character
// for the next call.
func (d *utf8Decoder) decode(p []byte) string {
	if len(d.pending) > 0 {
		p = append(d.pending, p...)
		d.pending = nil
	}
	// Look back at most three bytes for the start of an incomplete
	// character.
	keep := 0
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				keep = len(p) - i
			}
			break
		}
	}
	if keep > 0 {
		d.pending = append([]byte(nil), p[len(p)-keep:]...)
		p = p[:len(p)-keep]
	}
	return validUTF8(p)
}

// validUTF8 returns b as text, invalid bytes replaced by U+FFFD.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// binarySniffLen is how much of a file or body is searched for a NUL
// byte, the usual sign of binary content (as environment.ReadText does).
const binarySniffLen = 8 << 10

// nulIndex returns the offset of the first NUL byte in the first
// binarySniffLen bytes of b, or -1.
func nulIndex(b []byte) int {
	return bytes.IndexByte(b[:min(len(b), binarySniffLen)], 0)
}

// flush returns what is left at end of stream: an incomplete character is
// invalid by then.
func (d *utf8Decoder) flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	d.pending = nil
	return "\uFFFD"
}
