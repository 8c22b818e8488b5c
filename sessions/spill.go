package sessions

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/internal/pyrepr"
)

// Spill limits, as in Bub's spill sidecar.
const (
	// SpillChunkBytes is the most UTF-8 bytes one stored chunk holds; a
	// chunk never splits a character.
	SpillChunkBytes = 16384
	// MaxSpillReadChunks caps the chunks one ReadSpill returns.
	MaxSpillReadChunks = 4
	// SpillSidecar names the sidecar tape (<tape>__sidecar__spill).
	SpillSidecar = "spill"
)

// Errors of ReadSpill. The cursor, count and sidecar messages are what
// Bub's spill.read returns to the model, so they are kept verbatim —
// punctuation included, without the package prefix — for tools to pass on.
var (
	//lint:ignore ST1005 Bub's exact message to the model
	ErrSpillCursor = errors.New("`cursor` must be >= 0.")
	//lint:ignore ST1005 Bub's exact message to the model
	ErrSpillCount = errors.New("`count` must be >= 1.")
	// ErrNoSpill matches (errors.Is) the *SpillError for an unknown handle.
	ErrNoSpill = errors.New("sessions: no spilled tool result")
	// ErrIncompleteSpill matches the *SpillError for a manifest whose
	// chunks are missing or malformed.
	ErrIncompleteSpill = errors.New("sessions: incomplete spilled tool result")
)

// SpillError reports a spill that cannot be read. Its message is the exact
// text Bub's spill.read returns to the model, e.g.
// "[no spilled tool result for handle 'abc']".
type SpillError struct {
	Handle string
	Err    error  // ErrNoSpill or ErrIncompleteSpill
	Detail string // for ErrIncompleteSpill: what is wrong
}

// Error returns the model-facing text, so a tool can pass it on verbatim.
func (e *SpillError) Error() string {
	if errors.Is(e.Err, ErrNoSpill) {
		return "[no spilled tool result for handle " + pyrepr.String(e.Handle) + "]"
	}
	return "[incomplete spilled tool result: " + e.Detail + "]"
}

// Unwrap lets errors.Is match ErrNoSpill / ErrIncompleteSpill.
func (e *SpillError) Unwrap() error { return e.Err }

func incomplete(h, detail string) error {
	return &SpillError{Handle: h, Err: ErrIncompleteSpill, Detail: detail}
}

// SpillRef describes a stored spill; package spill turns it into
// the text the model sees in place of the full result.
type SpillRef struct {
	Handle string
	Bytes  int // UTF-8 bytes
	Chunks int
	Chars  int // characters (runes)
	Lines  int // newlines + 1
}

// Spill stores text, a tool result too large for the model's context, in
// the session's spill sidecar: 16 KiB UTF-8-safe chunks, each behind an
// anchor spill/<h>/chunk/<i> as a tool_result, then an anchor
// spill/<h>/manifest and a spill.manifest event — all in one fsynced write.
// The main tape gets a spill.write event (context=false). The handle is a
// random uuid4 in hex. Invalid UTF-8 is replaced by U+FFFD first, so what
// is read back is exactly what was counted.
//
// If storing fails, a spill.write event with status "error" is recorded
// and the error returned along with the ref (handle and size known so
// far); show the model FormatSpillFailure(text) then. A temp/ session keeps
// the spill in memory.
func (s *Session) Spill(tool, text string) (SpillRef, error) {
	s.life.RLock()
	defer s.life.RUnlock()
	text = strings.ToValidUTF8(text, "\uFFFD")
	ref := SpillRef{
		Handle: newHandle(),
		Bytes:  len(text),
		Chars:  utf8.RuneCountInString(text),
		Lines:  strings.Count(text, "\n") + 1,
	}
	chunks := utf8Chunks(text, SpillChunkBytes)
	ref.Chunks = len(chunks)

	err := s.storeSpill(ref, tool, chunks)
	data := map[string]any{"status": "ok", "handle": ref.Handle, "bytes": ref.Bytes, "chunks": ref.Chunks, "tool": tool}
	if err != nil {
		data = map[string]any{"status": "error", "handle": ref.Handle, "bytes": ref.Bytes, "tool": tool, "error": err.Error()}
	}
	if werr := s.tape.AppendAsync(KindEvent, eventPayload("spill.write", data), map[string]any{"context": false}); werr != nil {
		s.store.log.Warn("sessions: recording spill.write failed", "tape", s.tape.name, "error", werr)
	}
	return ref, err
}

func (s *Session) storeSpill(ref SpillRef, tool string, chunks []string) error {
	side, err := s.spillTape()
	if err != nil {
		return err
	}
	if ref.Bytes >= largeSpill {
		// The result's earlier copies (the transport's line, decode
		// buffers) are dead by now but not yet collected; collecting them
		// before the chunks are encoded keeps the peak near the result's
		// live copies (a 40 MB upstream result: 4.1x its size in RSS at
		// the peak without this, 3.x with it).
		runtime.GC()
	}
	h := ref.Handle
	ds := make([]draft, 0, 2*len(chunks)+2)
	for i, c := range chunks {
		a, err := makeDraft(KindAnchor, map[string]any{"name": chunkAnchor(h, i)}, nil)
		if err != nil {
			return err
		}
		d, err := chunkDraft(c, map[string]any{"spill_handle": h, "spill_chunk": i})
		if err != nil {
			return err
		}
		ds = append(ds, a, d)
	}
	a, err := makeDraft(KindAnchor, map[string]any{"name": manifestAnchor(h)}, nil)
	if err != nil {
		return err
	}
	m, err := makeDraft(KindEvent, eventPayload("spill.manifest", map[string]any{
		"handle": h, "chunks": ref.Chunks, "bytes": ref.Bytes, "chars": ref.Chars, "lines": ref.Lines, "tool": tool,
	}), map[string]any{"spill_handle": h})
	if err != nil {
		return err
	}
	ds = append(ds, a, m)
	_, err = side.appendDrafts(ds, true, nil)
	return err
}

// chunkDraft is makeDraft(KindToolResult, {"results": [c]}, meta) with
// its tape line written straight into a buffer of its size, leaving room
// for the id in front (draft.line): a large result's chunk is encoded
// once, not into a payload and then again into the line (a 40 MiB
// upstream result went through encoding/json's growing buffers, twice
// its size in garbage at the peak of the call; then through a payload
// and a line, both alive while one was copied into the other). The bytes
// are the same (AppendString is what the encoder writes).
func chunkDraft(c string, meta map[string]any) (draft, error) {
	m, err := encodeObject(meta)
	if err != nil {
		return draft{}, fmt.Errorf("sessions: encode %s meta: %w", KindToolResult, err)
	}
	date := formatDate(time.Now())
	b := make([]byte, lineRoom, lineRoom+len(c)+len(c)/16+len(m)+len(date)+96)
	b = append(b, `,"kind":`...)
	b = AppendString(b, KindToolResult)
	b = append(b, `,"payload":{"results":[`...)
	b = AppendString(b, c)
	b = append(b, `]},"meta":`...)
	b = append(b, m...)
	b = append(b, `,"date":`...)
	b = AppendString(b, date)
	b = append(b, "}\n"...)
	return draft{kind: KindToolResult, line: b, meta: m, date: date,
		p: map[string]any{"results": []string{c}}, m: meta}, nil
}

// largeSpill is the spill size from which storeSpill collects garbage
// first: rare, and a collection costs far less than the result's copies.
const largeSpill = 8 << 20

func chunkAnchor(h string, i int) string { return "spill/" + h + "/chunk/" + strconv.Itoa(i) }
func manifestAnchor(h string) string     { return "spill/" + h + "/manifest" }

// newHandle returns a random (version 4) UUID as 32 hex digits, like
// Python's uuid.uuid4().hex.
func newHandle() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// utf8Chunks cuts s into pieces of at most size bytes, moving each cut
// back to a character boundary.
func utf8Chunks(s string, size int) []string {
	var out []string
	for start := 0; start < len(s); {
		end := min(start+size, len(s))
		for end < len(s) && end > start && !utf8.RuneStart(s[end]) {
			end--
		}
		if end == start { // only possible with size < 4; never split below that
			end = min(start+size, len(s))
		}
		out = append(out, s[start:end])
		start = end
	}
	return out
}

// SpillPage is one bounded read of a spill.
type SpillPage struct {
	Handle string
	Bytes  int // the whole spill's size
	Chunks int // the whole spill's chunk count
	// First and Last are the chunk indices returned, -1 when none.
	First, Last int
	// NextCursor continues the read: pass it as cursor with the same
	// from_end to get the following (or, from the end, preceding) chunks.
	NextCursor int
	// Complete reports that this page reaches the end of the spill in the
	// reading direction.
	Complete bool
	Content  string
}

// ReadSpill returns up to count chunks (capped at MaxSpillReadChunks) of
// the spill with the given handle, starting at cursor, counted from the
// start or, with fromEnd, from the end (so cursor=0, fromEnd=true is the
// tail). Errors: ErrSpillCursor / ErrSpillCount for bad bounds, a
// *SpillError matching ErrNoSpill for an unknown handle or
// ErrIncompleteSpill for missing or malformed chunks.
func (s *Session) ReadSpill(handle string, cursor, count int, fromEnd bool) (SpillPage, error) {
	if cursor < 0 {
		return SpillPage{}, ErrSpillCursor
	}
	if count < 1 {
		return SpillPage{}, ErrSpillCount
	}
	count = min(count, MaxSpillReadChunks)
	s.life.RLock()
	defer s.life.RUnlock()
	side, err := s.spillTape()
	if err != nil {
		return SpillPage{}, err
	}
	return side.readSpill(handle, cursor, count, fromEnd)
}

func (t *Tape) readSpill(h string, cursor, count int, fromEnd bool) (SpillPage, error) {
	noSpill := &SpillError{Handle: h, Err: ErrNoSpill}
	src, err := t.open()
	if err != nil {
		return SpillPage{}, err
	}
	defer src.Close()
	manEnd, ok, err := lastAnchor(src, h, manifestAnchor(h))
	if err != nil {
		return SpillPage{}, err
	}
	if !ok {
		return SpillPage{}, noSpill
	}
	man, err := nextEntries(src, manEnd, KindEvent, 1)
	if err != nil {
		return SpillPage{}, err
	}
	if len(man) == 0 {
		return SpillPage{}, noSpill
	}
	manifest := man[0]
	if manifest.Payload["name"] != "spill.manifest" {
		return SpillPage{}, noSpill
	}
	data, _ := manifest.Payload["data"].(map[string]any)
	if data["handle"] != h {
		return SpillPage{}, noSpill
	}
	var nums [4]int
	for i, k := range []string{"chunks", "bytes", "chars", "lines"} {
		n, ok := asInt(data[k])
		if !ok || n < 0 {
			return SpillPage{}, noSpill
		}
		nums[i] = n
	}
	chunks, size := nums[0], nums[1]

	var start, stop, next int
	var complete bool
	if fromEnd {
		stop = max(0, chunks-cursor)
		start = max(0, stop-count)
		next = cursor + (stop - start)
		complete = start == 0
	} else {
		start = min(cursor, chunks)
		stop = min(start+count, chunks)
		next = stop
		complete = stop == chunks
	}
	page := SpillPage{Handle: h, Bytes: size, Chunks: chunks, First: -1, Last: -1, NextCursor: next, Complete: complete}
	if start == stop {
		page.Complete = true
		return page, nil
	}

	chunkEnd, ok, err := lastAnchor(src, h, chunkAnchor(h, start))
	if err != nil {
		return SpillPage{}, err
	}
	if !ok {
		return SpillPage{}, incomplete(h, fmt.Sprintf("missing chunk %d for handle %s", start, pyrepr.String(h)))
	}
	recs, err := nextEntries(src, chunkEnd, KindToolResult, stop-start)
	if err != nil {
		return SpillPage{}, err
	}
	if len(recs) != stop-start {
		return SpillPage{}, incomplete(h, "missing chunks for handle "+pyrepr.String(h))
	}
	var b strings.Builder
	for k, r := range recs {
		idx := start + k
		c, ok := spillChunk(r, h, idx)
		if !ok {
			return SpillPage{}, incomplete(h, fmt.Sprintf("invalid chunk %d for handle %s", idx, pyrepr.String(h)))
		}
		b.WriteString(c)
	}
	page.First, page.Last, page.Content = start, stop-1, b.String()
	return page, nil
}

// lastAnchor finds the last anchor named name, scanning back from the end
// of the sidecar (only lines mentioning the handle are decoded), and
// returns where its line ends.
func lastAnchor(src *source, handle, name string) (int64, bool, error) {
	var end int64
	found := false
	err := src.Backward(func(_, lineEnd int64, line []byte) bool {
		if !bytes.Contains(line, []byte(handle)) {
			return true
		}
		e, err := parseLine(line)
		if err != nil || e.Kind != KindAnchor || e.Payload["name"] != name {
			return true
		}
		end, found = lineEnd, true
		return false
	})
	if err != nil {
		return 0, false, fmt.Errorf("sessions: read spill sidecar: %w", err)
	}
	return end, found, nil
}

// nextEntries returns the first n entries of kind from off onward.
func nextEntries(src *source, off int64, kind string, n int) ([]Entry, error) {
	var out []Entry
	if n <= 0 {
		return nil, nil
	}
	err := src.Forward(off, func(_, _ int64, line []byte) bool {
		e, err := parseLine(line)
		if err == nil && e.Kind == kind {
			out = append(out, e)
		}
		return len(out) < n
	})
	if err != nil {
		return nil, fmt.Errorf("sessions: read spill sidecar: %w", err)
	}
	return out, nil
}

// spillChunk returns the text of chunk idx of spill h, if r is that chunk.
func spillChunk(r Entry, h string, idx int) (string, bool) {
	if rh, _ := r.Meta["spill_handle"].(string); rh != h {
		return "", false
	}
	if n, ok := asInt(r.Meta["spill_chunk"]); !ok || n != idx {
		return "", false
	}
	results, _ := r.Payload["results"].([]any)
	if len(results) != 1 {
		return "", false
	}
	c, ok := results[0].(string)
	return c, ok
}
