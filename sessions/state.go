package sessions

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// state summarises the complete lines of a tape file, [0, Size): all that
// is kept in memory of a tape, whatever its length, and what the snapshot
// beside the tape holds so a restart need not read the history again.
type state struct {
	// Size is where the last complete line ends; bytes after it are a
	// torn line or one still being written.
	Size int64 `json:"size"`
	// LastID is the highest id seen; the next append uses LastID+1.
	LastID int `json:"last_id"`
	// Tail is the last good line, the snapshot's check that the file is
	// still the one it describes.
	Tail    linePos `json:"tail"`
	Entries int     `json:"entries"`
	Anchors int     `json:"anchors"`
	// Anchor is the last anchor; nil when there is none.
	Anchor   *anchorPos     `json:"anchor,omitempty"`
	Settings Settings       `json:"settings"`
	Usage    map[string]any `json:"usage,omitempty"` // data.usage of the latest "run" event with total_tokens
}

// linePos locates one line: [Off, End) including its newline.
type linePos struct {
	Off int64 `json:"off"`
	End int64 `json:"end"`
	ID  int   `json:"id"`
}

// anchorPos is the last anchor: where it is, its name, and how many
// entries the tape had with it (for entries_since_last_anchor).
type anchorPos struct {
	linePos
	Name    string `json:"name"`
	HasName bool   `json:"has_name"`
	Entries int    `json:"entries"`
}

// header is what the summary needs of a line: id and kind always, the
// decoded payload for anchors and events only.
type header struct {
	id      int
	kind    string
	payload map[string]any
}

// add folds one good line at [off, off+n) into the summary.
func (s *state) add(h header, off, n int64) {
	s.Entries++
	if h.id > s.LastID {
		s.LastID = h.id
	}
	s.Tail = linePos{Off: off, End: off + n, ID: h.id}
	switch h.kind {
	case KindAnchor:
		s.Anchors++
		a := &anchorPos{linePos: s.Tail, Entries: s.Entries}
		if v, ok := h.payload["name"]; ok && v != nil {
			a.Name, a.HasName = fmt.Sprint(v), true
		}
		s.Anchor = a
	case KindEvent:
		s.Settings.apply(h.payload)
		if u, ok := runUsage(h.payload); ok {
			s.Usage = u
		}
	}
}

// peekLine checks a line with parseLine's rules but decodes the payload
// only where the summary needs it.
func peekLine(line []byte) (header, error) {
	raw, id, kind, err := parseHeader(line)
	if err != nil {
		return header{}, err
	}
	h := header{id: id, kind: kind}
	if kind == KindAnchor || kind == KindEvent {
		if h.payload, err = decodeObject(raw["payload"]); err != nil {
			return header{}, fmt.Errorf("sessions: invalid tape line: payload: %w", err)
		}
	}
	return h, nil
}

// snapshotVersion changes whenever state's meaning does; a snapshot of
// another version is ignored and rebuilt.
const snapshotVersion = 1

type snapshotFile struct {
	Version int   `json:"version"`
	State   state `json:"state"`
}

// snapshotPath is the snapshot beside the tape: "<tape>.jsonl.idx", a name
// Bub's "*.jsonl" tape listing does not pick up.
func (t *fileTape) snapshotPath() string { return t.path + ".idx" }

// writeSnapshot persists sum (write to a unique temporary name, rename).
// It is a cache: failures are logged, never returned, and it is not
// fsynced, since a stale or missing one is only rebuilt.
func (t *fileTape) writeSnapshot(sum *Summary) {
	b, err := json.Marshal(snapshotFile{Version: snapshotVersion, State: sum.st})
	if err != nil {
		t.log.Warn("sessions: encode tape snapshot", "tape", t.name, "error", err)
		return
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := t.snapshotPath() + ".tmp-" + hex.EncodeToString(rnd[:])
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.log.Warn("sessions: write tape snapshot", "tape", t.name, "error", err)
		return
	}
	if err := os.Rename(tmp, t.snapshotPath()); err != nil {
		os.Remove(tmp)
		t.log.Warn("sessions: write tape snapshot", "tape", t.name, "error", err)
		return
	}
	t.snapAt = sum.st.Size
}

// readSnapshot returns the snapshot when it still describes a prefix of f
// (of size size): its last good line and its last anchor are where it
// says, with the ids it says, and its end is a line boundary.
func (t *fileTape) readSnapshot(f io.ReaderAt, size int64) (state, bool) {
	b, err := os.ReadFile(t.snapshotPath())
	if err != nil {
		return state{}, false
	}
	var sf snapshotFile
	if err := json.Unmarshal(b, &sf); err != nil || sf.Version != snapshotVersion {
		return state{}, false
	}
	st := sf.State
	if st.Size <= 0 || st.Size > size || st.Tail.End > st.Size || st.Tail.Off >= st.Tail.End {
		return state{}, false
	}
	check := func(p linePos, kind string) bool {
		if p.End-p.Off > 64<<20 {
			return false
		}
		buf := make([]byte, p.End-p.Off)
		if _, err := f.ReadAt(buf, p.Off); err != nil || buf[len(buf)-1] != '\n' {
			return false
		}
		h, err := peekLine(buf[:len(buf)-1])
		return err == nil && h.id == p.ID && (kind == "" || h.kind == kind)
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], st.Size-1); err != nil || last[0] != '\n' {
		return state{}, false
	}
	if !check(st.Tail, "") || st.Anchor != nil && !check(st.Anchor.linePos, KindAnchor) {
		return state{}, false
	}
	if st.Anchor != nil && (st.Anchor.End > st.Size || st.Anchor.Entries > st.Entries) {
		return state{}, false
	}
	return st, true
}

// scanForward calls fn for each line (without its newline) of r in
// [from, to), with its offset, until fn returns false. to must be a line
// boundary.
func scanForward(r io.ReaderAt, from, to int64, fn func(off int64, line []byte) bool) error {
	block := 64 << 10
	var carry []byte
	pos := from
	for pos < to {
		block = max(block, len(carry)) // a long line: read more at a time
		n := min(int64(block), to-pos)
		buf := make([]byte, len(carry)+int(n))
		copy(buf, carry)
		if _, err := r.ReadAt(buf[len(carry):], pos); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		start := pos - int64(len(carry))
		pos += n
		rest := buf
		for {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			if !fn(start, rest[:i]) {
				return nil
			}
			start += int64(i) + 1
			rest = rest[i+1:]
		}
		carry = rest
	}
	return nil
}

// scanBackward calls fn for each line of r in [from, to), newest first,
// until fn returns false. to must be a line boundary.
func scanBackward(r io.ReaderAt, from, to int64, fn func(off int64, line []byte) bool) error {
	block := 64 << 10
	var tail []byte // bytes [pos, pos+len(tail)), ending in '\n'
	pos := to
	for pos > from {
		block = max(block, len(tail)) // a long line: read more at a time
		n := min(int64(block), pos-from)
		buf := make([]byte, int(n)+len(tail))
		if _, err := r.ReadAt(buf[:n], pos-n); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		copy(buf[n:], tail)
		pos -= n
		tail = buf
		for len(tail) > 0 {
			i := bytes.LastIndexByte(tail[:len(tail)-1], '\n')
			if i < 0 {
				break
			}
			if !fn(pos+int64(i)+1, tail[i+1:len(tail)-1]) {
				return nil
			}
			tail = tail[:i+1]
		}
	}
	if len(tail) > 0 {
		fn(from, tail[:len(tail)-1])
	}
	return nil
}
