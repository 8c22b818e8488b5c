package sessions

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Tape is one append-only log: a session's main tape or its spill sidecar.
// It keeps its entries in memory (read once from disk on open) and appends
// to the file; see the package documentation for what each append path
// promises. All methods are safe for concurrent use; concurrent writers are
// serialised and get distinct, increasing ids.
type Tape struct {
	name  string
	path  string // "" keeps the tape in memory only (temp/ sessions)
	store *Store

	// wmu serialises file writes so lines reach the file in id order. Lock
	// order: wmu, then mu. Fields below are guarded by wmu.
	wmu         sync.Mutex
	f           *os.File
	size        int64
	needNewline bool // the file does not end in '\n' (torn line)
	failing     bool // the last write failed; log once until one succeeds

	mu       sync.Mutex
	closed   bool
	records  []record
	live     map[int]held // by index into records: entries held in memory
	kinds    []string     // interned entry kinds (record.kind)
	kindIdx  map[string]uint32
	nextID   int
	pending  []pendingLine
	anchorAt map[string]int // anchor name -> index of its last record
	anchors  int
	last     int // index of the last anchor, -1 if none
	settings Settings
	usage    map[string]any // data.usage of the latest "run" event with total_tokens
}

// record locates one entry of the tape. It holds no pointers: a
// long-running server appends an audit pair per tool call, and an index of
// pointer-free records is free for the garbage collector to keep, where
// one of entries made every collection scan the whole history. What an
// entry holds in memory lives in Tape.live: anchors always (few, read
// often), entries whose line is not on disk yet, and every entry of a tape
// without a file. Written entries are read back by offset.
type record struct {
	id   int
	off  int64  // file offset of the line, -1 until written
	n    int    // line length without the newline
	kind uint32 // index into Tape.kinds
}

// held is an entry kept in memory, stored by value (no allocation of its
// own). What it refers to is never changed once made, so readers copy it
// under t.mu and use it after.
type held struct {
	Entry
	line []byte // the encoded line, when no decoded copy is kept
}

// ref is a record with what readers need of it outside t.mu.
type ref struct {
	record
	kind string
	h    held
	ok   bool // h is set: the entry is in memory
}

// refLocked returns record i as a ref. t.mu must be held.
func (t *Tape) refLocked(i int) ref {
	r := t.records[i]
	h, ok := t.live[i]
	return ref{record: r, kind: t.kinds[r.kind], h: h, ok: ok}
}

// refsLocked returns records [from, to) as refs. t.mu must be held.
func (t *Tape) refsLocked(from, to int) []ref {
	out := make([]ref, 0, max(to-from, 0))
	for i := from; i < to; i++ {
		out = append(out, t.refLocked(i))
	}
	return out
}

// kindOf returns record i's kind. t.mu must be held.
func (t *Tape) kindOf(i int) string { return t.kinds[t.records[i].kind] }

// evict lets a written entry other than an anchor go from memory (see
// record). t.mu must be held.
func (t *Tape) evict(i int) {
	if t.path != "" && t.records[i].off >= 0 && t.kindOf(i) != KindAnchor {
		delete(t.live, i)
	}
}

type pendingLine struct {
	line []byte
	idx  int // index into records
}

// draft is an entry before it has an id: its kind, its encoded objects
// and the maps the appended Entry carries: the tape's decoded copies for
// anchors and events, else the caller's own maps (lineOnly), which the
// tape does not keep.
type draft struct {
	kind     string
	payload  []byte
	meta     []byte
	p, m     map[string]any
	lineOnly bool
}

func newTape(s *Store, name, path string) *Tape {
	return &Tape{name: name, path: path, store: s, nextID: 1, last: -1, anchorAt: map[string]int{},
		live: map[int]held{}, kindIdx: map[string]uint32{}}
}

// Name is the tape's name, the file name without ".jsonl".
func (t *Tape) Name() string { return t.name }

// Path is the tape's file, or "" for a memory-only (temp/) tape.
func (t *Tape) Path() string { return t.path }

func makeDraft(kind string, payload, meta map[string]any) (draft, error) {
	if kind == "" {
		return draft{}, errors.New("sessions: empty entry kind")
	}
	p, err := encodeObject(payload)
	if err != nil {
		return draft{}, fmt.Errorf("sessions: encode %s payload: %w", kind, err)
	}
	m, err := encodeObject(meta)
	if err != nil {
		return draft{}, fmt.Errorf("sessions: encode %s meta: %w", kind, err)
	}
	d := draft{kind: kind, payload: p, meta: m, p: payload, m: meta, lineOnly: true}
	// Only anchors and events feed derived state (anchor index, settings,
	// usage), so only they keep a decoded copy; the others are read back
	// from their line. Decoding what was encoded gives the copy the exact
	// shape a restart would (float64 numbers, []any, map[string]any), and
	// it shares nothing with the caller's maps.
	if kind == KindAnchor || kind == KindEvent {
		d.lineOnly = false
		if d.p, err = decodeObject(p); err != nil {
			return draft{}, fmt.Errorf("sessions: decode %s payload: %w", kind, err)
		}
		if d.m, err = decodeObject(m); err != nil {
			return draft{}, fmt.Errorf("sessions: decode %s meta: %w", kind, err)
		}
	}
	return d, nil
}

// Append records an entry and writes it to the file with one write(2)
// before returning, so it survives a crash of this process (the returned
// entry's payload and meta are the ones given, or for anchors and events
// their normalised copies); anchors,
// handoffs and *_switch events are also fsynced (see the package doc). Any
// entries still queued by AppendAsync go out in the same write, ahead of
// this one. If the write fails the entry stays visible in memory and queued,
// the next commit retries it, and the error tells the caller it is not yet
// on disk.
func (t *Tape) Append(kind string, payload, meta map[string]any) (Entry, error) {
	d, err := makeDraft(kind, payload, meta)
	if err != nil {
		return Entry{}, err
	}
	es, err := t.appendDrafts([]draft{d}, false)
	if len(es) == 0 {
		return Entry{}, err
	}
	return es[0], err
}

// AppendEvent appends {"name": name, "data": data} as an "event" entry
// through Append. A nil data is recorded as {}.
func (t *Tape) AppendEvent(name string, data, meta map[string]any) (Entry, error) {
	return t.Append(KindEvent, eventPayload(name, data), meta)
}

func eventPayload(name string, data map[string]any) map[string]any {
	if data == nil {
		data = map[string]any{}
	}
	return map[string]any{"name": name, "data": data}
}

// AppendAsync records an entry for the audit trail without touching the
// disk: the id is assigned now (and is visible to readers at once) and the
// line is written by the next group commit, at most
// [Options.CommitInterval] later. A crash before that commit loses it. The
// only errors are encoding failures and ErrClosed. As with Append, the
// returned entry carries the given payload and meta, except for anchors and
// events, whose normalised (decoded) copies it carries.
func (t *Tape) AppendAsync(kind string, payload, meta map[string]any) (Entry, error) {
	d, err := makeDraft(kind, payload, meta)
	if err != nil {
		return Entry{}, err
	}
	return t.queue(d)
}

// queue records d and leaves its line to the next group commit.
func (t *Tape) queue(d draft) (Entry, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return Entry{}, ErrClosed
	}
	e, line := t.recordLocked(d)
	first := false
	if t.path != "" {
		first = len(t.pending) == 0
		t.pending = append(t.pending, pendingLine{line: line, idx: len(t.records) - 1})
	}
	t.mu.Unlock()
	if first {
		t.store.markDirty(t)
	}
	return e, nil
}

// AppendAsyncJSON is AppendAsync for an entry its caller encoded: payload
// and meta must each be one JSON object in compact form (no newline), as
// [AppendString] and json.Compact write them; they are written as they
// are. It is the audit trail's path, where building maps only to encode
// them was most of the cost. Anchors and events, which feed the tape's
// derived state, must go through Append.
func (t *Tape) AppendAsyncJSON(kind string, payload, meta []byte) error {
	if kind == "" || kind == KindAnchor || kind == KindEvent {
		return fmt.Errorf("sessions: AppendAsyncJSON cannot record a %q entry", kind)
	}
	if !isObject(payload) || !isObject(meta) {
		return fmt.Errorf("sessions: %s entry: payload and meta must be compact JSON objects", kind)
	}
	_, err := t.queue(draft{kind: kind, payload: payload, meta: meta, lineOnly: true})
	return err
}

// isObject is AppendAsyncJSON's cheap guard against a broken line: an
// object's braces and no newline. Full validation is the caller's.
func isObject(b []byte) bool {
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}' && bytes.IndexByte(b, '\n') < 0
}

// appendDrafts records drafts in order and writes them, plus anything
// queued, in a single write. It fsyncs when forceSync is set or any draft
// needs it under the durability policy.
func (t *Tape) appendDrafts(ds []draft, forceSync bool) ([]Entry, error) {
	if t.path == "" {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed {
			return nil, ErrClosed
		}
		es := make([]Entry, len(ds))
		for i, d := range ds {
			es[i], _ = t.recordLocked(d)
		}
		return es, nil
	}

	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	batch := t.pending
	t.pending = nil
	es := make([]Entry, len(ds))
	sync := forceSync
	for i, d := range ds {
		var line []byte
		es[i], line = t.recordLocked(d)
		batch = append(batch, pendingLine{line: line, idx: len(t.records) - 1})
		sync = sync || needsSync(es[i])
	}
	t.mu.Unlock()

	if err := t.writeLocked(batch); err != nil {
		return es, err
	}
	if sync {
		if err := t.f.Sync(); err != nil {
			return es, fmt.Errorf("sessions: fsync tape %s: %w", t.name, err)
		}
	}
	return es, nil
}

// needsSync is the fsync policy: entries that decide what later turns see
// (anchors, handoffs, settings switches) are made durable at once.
func needsSync(e Entry) bool {
	switch e.Kind {
	case KindAnchor:
		return true
	case KindEvent:
		name, _ := e.Payload["name"].(string)
		return name == "handoff" || strings.HasSuffix(name, "_switch")
	}
	return false
}

// recordLocked assigns the next id and date, keeps the entry in memory and
// returns it with its encoded line. t.mu must be held.
func (t *Tape) recordLocked(d draft) (Entry, []byte) {
	e := Entry{ID: t.nextID, Kind: d.kind, Payload: d.p, Meta: d.m, Date: formatDate(time.Now())}
	t.nextID++
	line := encodeLine(e.ID, e.Kind, d.payload, d.meta, e.Date)
	h := held{Entry: e}
	if d.lineOnly {
		h.Payload, h.Meta, h.line = nil, nil, line // readers decode the entry from its line
	}
	t.addLocked(record{id: e.ID, off: -1, n: len(line) - 1}, e.Kind, h)
	return e, line
}

// addLocked appends a record, held in memory as h, and updates the derived
// state (anchor index, settings, token usage). t.mu must be held.
func (t *Tape) addLocked(r record, kind string, h held) {
	k, ok := t.kindIdx[kind]
	if !ok {
		k = uint32(len(t.kinds))
		t.kinds = append(t.kinds, kind)
		t.kindIdx[kind] = k
	}
	r.kind = k
	t.records = append(t.records, r)
	idx := len(t.records) - 1
	t.live[idx] = h
	switch kind {
	case KindAnchor:
		t.anchors++
		t.last = idx
		name, _ := h.Payload["name"].(string)
		t.anchorAt[name] = idx
	case KindEvent:
		t.settings.apply(h.Payload)
		if u, ok := runUsage(h.Payload); ok {
			t.usage = u
		}
	}
	if r.id >= t.nextID {
		t.nextID = r.id + 1
	}
}

// ensureFileLocked opens the tape file for appending, creating it (0600)
// and fsyncing its directory on first use so the new name survives a
// crash. t.wmu must be held.
func (t *Tape) ensureFileLocked() error {
	if t.f != nil {
		return nil
	}
	dir := filepath.Dir(t.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sessions: create tapes directory: %w", err)
	}
	_, statErr := os.Stat(t.path)
	f, err := os.OpenFile(t.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sessions: open tape %s: %w", t.name, err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		syncDir(dir)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("sessions: stat tape %s: %w", t.name, err)
	}
	t.size = st.Size()
	t.needNewline = false
	if t.size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], t.size-1); err == nil && last[0] != '\n' {
			t.needNewline = true
		}
	}
	t.f = f
	return nil
}

// syncDir fsyncs a directory so entries created or renamed in it are
// durable. Failures are ignored: some filesystems cannot sync directories.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// writeLocked writes batch with a single write(2). On failure the lines not
// fully written are queued again (ahead of newer ones) for the next commit;
// a partly written line is rewritten whole on a fresh line, the fragment
// being skipped as torn when the tape is next read. t.wmu must be held.
func (t *Tape) writeLocked(batch []pendingLine) error {
	if len(batch) == 0 {
		return nil
	}
	err := t.ensureFileLocked()
	var n int
	prefix := 0
	if err == nil {
		size := 0
		for _, p := range batch {
			size += len(p.line)
		}
		buf := make([]byte, 0, size+1)
		if t.needNewline {
			buf = append(buf, '\n')
			prefix = 1
		}
		for _, p := range batch {
			buf = append(buf, p.line...)
		}
		n, err = t.f.Write(buf)
	}
	base := t.size + int64(prefix)
	t.size += int64(n)
	if prefix == 1 && n >= 1 {
		t.needNewline = false
	}

	// Work out which lines made it to the file.
	written := len(batch)
	if err != nil {
		written = 0
		got := max(n-prefix, 0)
		for _, p := range batch {
			if got < len(p.line) {
				break
			}
			got -= len(p.line)
			written++
		}
		if got > 0 {
			t.needNewline = true
		}
	}

	t.mu.Lock()
	off := base
	for _, p := range batch[:written] {
		if p.idx < len(t.records) {
			t.records[p.idx].off = off
			t.evict(p.idx)
		}
		off += int64(len(p.line))
	}
	if err != nil {
		rest := append([]pendingLine(nil), batch[written:]...)
		t.pending = append(rest, t.pending...)
	}
	t.mu.Unlock()

	if err != nil {
		if !t.failing {
			t.store.log.Warn("sessions: tape write failed; entries stay queued", "tape", t.name, "error", err)
		}
		t.failing = true
		t.store.markDirty(t)
		return fmt.Errorf("sessions: write tape %s: %w", t.name, err)
	}
	if t.failing {
		t.store.log.Info("sessions: tape writes recovered", "tape", t.name)
		t.failing = false
	}
	return nil
}

// commit writes queued entries; called by the group-commit goroutine.
// Errors are logged by writeLocked and retried on the next commit.
func (t *Tape) commit(sync bool) {
	if t.path == "" {
		return
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	batch := t.pending
	t.pending = nil
	t.mu.Unlock()
	if err := t.writeLocked(batch); err != nil || !sync || t.f == nil {
		return
	}
	if err := t.f.Sync(); err != nil {
		t.store.log.Warn("sessions: tape fsync failed", "tape", t.name, "error", err)
	}
}

// Flush writes every entry queued by AppendAsync and fsyncs the file, for
// callers that need the audit trail durable now (before handing a tape to
// another process, say). It is a no-op for memory-only tapes.
func (t *Tape) Flush() error {
	if t.path == "" {
		return nil
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	batch := t.pending
	t.pending = nil
	t.mu.Unlock()
	if err := t.writeLocked(batch); err != nil {
		return err
	}
	if t.f == nil {
		return nil
	}
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("sessions: fsync tape %s: %w", t.name, err)
	}
	return nil
}

// close flushes and closes the file; later appends fail with ErrClosed.
func (t *Tape) close() error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	batch := t.pending
	t.pending = nil
	t.mu.Unlock()
	if t.path == "" {
		return nil
	}
	err := t.writeLocked(batch)
	if t.f != nil {
		if serr := t.f.Sync(); serr != nil && err == nil {
			err = fmt.Errorf("sessions: fsync tape %s: %w", t.name, serr)
		}
		if cerr := t.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("sessions: close tape %s: %w", t.name, cerr)
		}
		t.f = nil
	}
	return err
}

// load reads the tape file, if any. Lines that do not parse are skipped
// with a warning — a torn last line after a crash is expected, never an
// error — and ids continue after the highest good one.
func (t *Tape) load() error {
	if t.path == "" {
		return nil
	}
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sessions: open tape %s: %w", t.name, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var off int64
	lineNo := 0
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		line, rerr := r.ReadBytes('\n')
		if len(line) > 0 {
			lineNo++
			complete := line[len(line)-1] == '\n'
			body := line
			if complete {
				body = line[:len(line)-1]
			}
			e, perr := parseLine(body)
			switch {
			case perr == nil:
				t.addLocked(record{id: e.ID, off: off, n: len(body)}, e.Kind, held{Entry: e})
				t.evict(len(t.records) - 1)
			case errors.Is(perr, errBlankLine):
			case !complete:
				t.store.log.Warn("sessions: skipping torn last tape line", "tape", t.path, "line", lineNo, "error", perr)
			default:
				t.store.log.Warn("sessions: skipping invalid tape line", "tape", t.path, "line", lineNo, "error", perr)
			}
			off += int64(len(line))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("sessions: read tape %s: %w", t.name, rerr)
		}
	}
	return nil
}

// entries returns the records' full entries, reading evicted ones back
// from the file. Callers copy the records under t.mu and call this without
// it. An entry that cannot be read back (the file was damaged underneath
// us) is returned without payload and meta, and the failure is logged:
// readers are reports, not writers.
func (t *Tape) entries(rs []ref) []Entry {
	rd := t.reader()
	defer rd.close()
	out := make([]Entry, len(rs))
	for i, r := range rs {
		e, err := rd.entry(r)
		if err != nil {
			t.store.log.Warn("sessions: reading back a tape entry", "tape", t.name, "id", r.id, "error", err)
			e = Entry{ID: r.id, Kind: r.kind}
		}
		out[i] = e
	}
	return out
}

// entryReader reads evicted records back, opening the file once, on
// first need.
type entryReader struct {
	t *Tape
	f *os.File
}

func (t *Tape) reader() *entryReader { return &entryReader{t: t} }

func (rd *entryReader) close() {
	if rd.f != nil {
		rd.f.Close()
	}
}

// entry returns r's full entry.
func (rd *entryReader) entry(r ref) (Entry, error) {
	if r.ok {
		if r.h.line != nil {
			return parseLine(r.h.line[:r.n])
		}
		return r.h.Entry, nil
	}
	t := rd.t
	if rd.f == nil {
		f, err := os.Open(t.path)
		if err != nil {
			return Entry{}, fmt.Errorf("sessions: open tape %s: %w", t.name, err)
		}
		rd.f = f
	}
	buf := make([]byte, r.n)
	if _, err := rd.f.ReadAt(buf, r.off); err != nil {
		return Entry{}, fmt.Errorf("sessions: read entry %d of tape %s: %w", r.id, t.name, err)
	}
	e, err := parseLine(buf)
	if err != nil {
		return Entry{}, err
	}
	if e.ID != r.id {
		return Entry{}, fmt.Errorf("sessions: entry %d of tape %s moved on disk", r.id, t.name)
	}
	return e, nil
}

// reset empties the tape, first moving its file to an archive named
// <file>.<stamp>.bak when stamp is set. mustArchive makes an archive even
// when no file exists yet (the main tape always reports one). It returns
// the archive path, "" when none was made. On an archive failure nothing is
// reset.
func (t *Tape) reset(stamp string, mustArchive bool) (string, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return "", ErrClosed
	}
	batch := t.pending
	t.pending = nil
	t.mu.Unlock()

	var archived string
	if t.path != "" {
		if err := t.writeLocked(batch); err != nil && stamp != "" {
			return "", err
		}
		if t.f != nil {
			_ = t.f.Sync()
			t.f.Close()
			t.f = nil
		}
		if stamp != "" {
			var err error
			if archived, err = archiveFile(t.path, stamp, mustArchive); err != nil {
				return "", fmt.Errorf("sessions: archive tape %s: %w", t.name, err)
			}
		} else if err := os.Remove(t.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("sessions: reset tape %s: %w", t.name, err)
		}
		syncDir(filepath.Dir(t.path))
		t.size, t.needNewline = 0, false
	}

	t.mu.Lock()
	t.records = nil
	t.live = map[int]held{}
	t.pending = nil
	t.nextID = 1
	t.anchorAt = map[string]int{}
	t.anchors = 0
	t.last = -1
	t.settings = Settings{}
	t.usage = nil
	t.mu.Unlock()
	return archived, nil
}

// archiveFile renames path to path.<stamp>.bak, never overwriting an
// existing archive (a second reset within the same second gets
// path.<stamp>-2.bak). With no file to move it creates an empty archive
// when mustArchive is set, else returns "".
func archiveFile(path, stamp string, mustArchive bool) (string, error) {
	_, err := os.Stat(path)
	missing := errors.Is(err, fs.ErrNotExist)
	if missing && !mustArchive {
		return "", nil
	}
	for i := 1; i < 1000; i++ {
		dst := path + "." + stamp + ".bak"
		if i > 1 {
			dst = path + "." + stamp + "-" + strconv.Itoa(i) + ".bak"
		}
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if missing {
			f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err != nil {
				return "", err
			}
			return dst, f.Close()
		}
		if err := os.Rename(path, dst); err != nil {
			return "", err
		}
		return dst, nil
	}
	return "", errors.New("too many archives with the same timestamp")
}
