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

	"github.com/bubbuild/bub-mcp/internal/sharedfile"
)

// Tape is one append-only log: a session's main tape or its spill sidecar.
// It keeps no entries in memory, only a summary of the file (see state):
// every reader streams from the file, and every append first takes an
// exclusive flock, picks up what other processes appended since, and only
// then assigns ids, so several processes can share a tape. All methods are
// safe for concurrent use.
type Tape struct {
	name  string
	path  string // "" keeps the tape in memory only (temp/ sessions)
	store *Store

	// mu serialises this process's writes and guards the fields below;
	// the flock on file serialises processes. It is held across a write
	// and its fsync, never across a reader's scan.
	mu      sync.Mutex
	closed  bool
	file    *sharedfile.File // nil for memory and PostgreSQL tapes
	pg      *pgTape          // nil unless the store is PostgreSQL
	ident   os.FileInfo      // the file st describes; nil before there is one
	statAt  time.Time        // when a settings read last looked at the file (refreshAt)
	st      state
	mem     []byte // memory tapes: the whole tape
	failing bool   // the last write failed; log once until one succeeds
	snapAt  int64  // st.Size when the snapshot was last written or read

	// qmu guards pending, so AppendAsync never waits for the disk.
	qmu     sync.Mutex
	pending []draft
}

// snapshotEvery is how many bytes a tape may grow past its snapshot before
// a new one is written: a restart then scans at most this much.
const snapshotEvery = 1 << 20

// draft is an entry before it has an id: its kind, its encoded objects,
// its date and, for anchors and events (which feed the tape's summary and
// are returned to the caller), their decoded copies.
type draft struct {
	kind    string
	payload []byte
	meta    []byte
	date    string
	p, m    map[string]any
}

// newTape makes a tape: in memory when path is "" (temp/ sessions), else
// in the store's PostgreSQL database when it has one, else at path.
func newTape(s *Store, name, path string) *Tape {
	t := &Tape{name: name, path: path, store: s}
	switch {
	case path == "":
	case s.pg != nil:
		t.path, t.pg = "", &pgTape{s: s.pg, name: name}
	default:
		t.file = sharedfile.New(path)
	}
	return t
}

// memory reports whether the tape lives in this process only.
func (t *Tape) memory() bool { return t.path == "" && t.pg == nil }

// Name is the tape's name, the file name without ".jsonl".
func (t *Tape) Name() string { return t.name }

// Path is the tape's file, or "" for a memory-only (temp/) tape or one
// kept in PostgreSQL.
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
	d := draft{kind: kind, payload: p, meta: m, date: formatDate(time.Now()), p: payload, m: meta}
	// Anchors and events are returned in the shape a restart reads them
	// back in (float64 numbers, []any, map[string]any), sharing nothing
	// with the caller's maps.
	if kind == KindAnchor || kind == KindEvent {
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
// before returning, so it survives a crash of this process; anchors,
// handoffs and *_switch events are also fsynced (see the package doc). Any
// entries still queued by AppendAsync go out in the same write, ahead of
// this one. The returned entry carries its id and the given payload and
// meta (for anchors and events, their normalised copies). When the write
// fails the entry is not recorded and the error says why.
func (t *Tape) Append(kind string, payload, meta map[string]any) (Entry, error) {
	d, err := makeDraft(kind, payload, meta)
	if err != nil {
		return Entry{}, err
	}
	es, err := t.appendDrafts([]draft{d}, false, nil)
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
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

// AppendAsync queues an entry for the next group commit, at most
// [Options.CommitInterval] later, without touching the disk: it is for
// bookkeeping (loop events, spill records) whose loss in a crash costs
// little. Its id is assigned when it is written, under the file lock, so
// ids stay unique across processes; any read of the tape writes the queue
// first, so readers always see it. The only errors are encoding failures
// and ErrClosed.
func (t *Tape) AppendAsync(kind string, payload, meta map[string]any) error {
	d, err := makeDraft(kind, payload, meta)
	if err != nil {
		return err
	}
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if t.memory() {
		_, err := t.appendDrafts([]draft{d}, false, nil)
		return err
	}
	t.qmu.Lock()
	first := len(t.pending) == 0
	t.pending = append(t.pending, d)
	t.qmu.Unlock()
	if first {
		t.store.markDirty(t)
	}
	return nil
}

// takePending empties the queue.
func (t *Tape) takePending() []draft {
	t.qmu.Lock()
	defer t.qmu.Unlock()
	p := t.pending
	t.pending = nil
	return p
}

// requeue puts drafts that could not be written back ahead of newer ones.
func (t *Tape) requeue(ds []draft) {
	if len(ds) == 0 {
		return
	}
	t.qmu.Lock()
	t.pending = append(ds, t.pending...)
	t.qmu.Unlock()
	t.store.markDirty(t)
}

// needsSync is the fsync policy: entries that decide what later turns see
// (anchors, handoffs, settings switches) are made durable at once.
func needsSync(d draft) bool {
	switch d.kind {
	case KindAnchor:
		return true
	case KindEvent:
		name, _ := d.p["name"].(string)
		return name == EventHandoff || strings.HasSuffix(name, "_switch")
	}
	return false
}

// appendDrafts writes the queued entries and then ds with a single write,
// under the file lock, after catching up with what others appended. When
// cond is set it is asked first, with the caught-up summary, and nothing
// of ds is written when it returns false (EnsureBootstrap's "only if no
// anchor yet" across processes). It fsyncs when forceSync is set or any
// entry needs it. It returns ds as entries, with their ids.
func (t *Tape) appendDrafts(ds []draft, forceSync bool, cond func(*state) bool) ([]Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	queued := t.takePending()
	es, err := t.writeLocked(queued, ds, forceSync, cond)
	if err != nil {
		t.requeue(queued)
		return nil, err
	}
	return es, nil
}

// writeLocked does appendDrafts' work; t.mu must be held.
func (t *Tape) writeLocked(queued, ds []draft, forceSync bool, cond func(*state) bool) ([]Entry, error) {
	if t.pg != nil {
		return t.pgWriteLocked(queued, ds, forceSync, cond)
	}
	if t.path == "" {
		if cond != nil && !cond(&t.st) {
			ds = nil
		}
		all := append(queued, ds...)
		buf, es := t.encodeLocked(all)
		t.mem = append(t.mem, buf...)
		t.foldWritten(all, es, buf, t.st.Size)
		return es[len(queued):], nil
	}
	if len(queued) == 0 && len(ds) == 0 {
		return nil, nil
	}
	f, fi, created, err := t.file.Lock()
	if err != nil {
		return nil, t.writeFailed(fmt.Errorf("sessions: open tape %s: %w", t.name, err))
	}
	defer t.file.Unlock()
	if created {
		sharedfile.SyncDir(filepath.Dir(t.path))
	}
	torn, err := t.refreshLocked(f, fi)
	if err == nil && torn {
		// The file ends in a line nobody is writing (we hold the lock): a
		// crash's torn line, or one written without its newline. End it,
		// so it is read (or skipped) as a line of its own before ids are
		// given out after it.
		if _, err = f.Write([]byte{'\n'}); err == nil {
			if fi, err = f.Stat(); err == nil {
				_, err = t.refreshLocked(f, fi)
			}
		}
	}
	if err != nil {
		return nil, t.writeFailed(err)
	}
	if cond != nil && !cond(&t.st) {
		ds = nil
	}
	all := append(queued, ds...)
	if len(all) == 0 {
		return nil, nil
	}
	buf, es := t.encodeLocked(all)
	if _, err := f.Write(buf); err != nil {
		// Whatever part reached the file is a torn line the next writer
		// starts after; the next refresh reads what did arrive.
		return nil, t.writeFailed(fmt.Errorf("sessions: write tape %s: %w", t.name, err))
	}
	if t.failing {
		t.store.log.Info("sessions: tape writes recovered", "tape", t.name)
		t.failing = false
	}
	// We hold the lock and the file ended at st.Size: our lines follow.
	t.foldWritten(all, es, buf, t.st.Size)
	sync := forceSync || t.store.opts.SyncCommits && len(ds) == 0
	for _, d := range all {
		sync = sync || needsSync(d)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return es[len(queued):], fmt.Errorf("sessions: fsync tape %s: %w", t.name, err)
		}
	}
	t.maybeSnapshotLocked()
	return es[len(queued):], nil
}

// writeFailed logs the first of a run of failures and returns err.
func (t *Tape) writeFailed(err error) error {
	if !t.failing {
		t.store.log.Warn("sessions: tape write failed", "tape", t.name, "error", err)
	}
	t.failing = true
	return err
}

// encodeLocked assigns ids after the tape's last one and encodes the
// lines.
func (t *Tape) encodeLocked(ds []draft) ([]byte, []Entry) {
	var buf []byte
	es := make([]Entry, len(ds))
	id := t.st.LastID
	for i, d := range ds {
		id++
		buf = append(buf, encodeLine(id, d.kind, d.payload, d.meta, d.date)...)
		es[i] = Entry{ID: id, Kind: d.kind, Payload: d.p, Meta: d.m, Date: d.date}
	}
	return buf, es
}

// refreshLocked brings st up to date with the file f (which the path
// names now): a different file than st describes (a reset by another
// process, or the first look) is summarised afresh, from its snapshot when
// that is still valid; a grown one has its new complete lines folded in.
// It reports whether the file ends in a torn line. t.mu must be held.
func (t *Tape) refreshLocked(f *os.File, fi os.FileInfo) (torn bool, err error) {
	if t.ident == nil || !os.SameFile(fi, t.ident) || fi.Size() < t.st.Size {
		t.st = state{}
		t.ident = fi
		t.snapAt = 0
		if snap, ok := t.readSnapshot(f, fi.Size()); ok {
			t.st = snap
			t.snapAt = snap.Size
		}
	}
	if fi.Size() == t.st.Size {
		return false, nil
	}
	end, err := t.foldFile(f, t.st.Size, fi.Size())
	if err != nil {
		return false, err
	}
	return end < fi.Size(), nil
}

// refresh catches up with the file without writing; readers call it. It
// also writes what AppendAsync queued, so a reader sees it with its id.
func (t *Tape) refresh() error { return t.refreshAt(true) }

// fileRefreshInterval is how stale a process's view of a file tape's
// settings may be: another process's switch shows within it.
const fileRefreshInterval = 250 * time.Millisecond

// refreshAt is refresh; fresh=false lets a tape answer from a summary up
// to fileRefreshInterval (files) or pgRefreshInterval (PostgreSQL) old:
// Settings, asked on every request, then costs a stat(2) at most four
// times a second instead of once per call (5% of an echo call's CPU).
func (t *Tape) refreshAt(fresh bool) error {
	if t.memory() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil // readers still read what is there
	}
	if q := t.takePending(); len(q) > 0 {
		if _, err := t.writeLocked(q, nil, false, nil); err != nil {
			t.requeue(q)
			t.store.log.Warn("sessions: writing queued entries before a read", "tape", t.name, "error", err)
		}
		return nil // writeLocked refreshed
	}
	if t.pg != nil {
		// A database that does not answer leaves the last summary in
		// place: settings stay as last seen, and writes say what fails.
		if err := t.pgRefreshLocked(fresh); err != nil {
			t.store.log.Warn("sessions: refreshing a tape", "tape", t.name, "error", err)
		}
		return nil
	}
	if !fresh && time.Since(t.statAt) < fileRefreshInterval {
		return nil
	}
	t.statAt = time.Now()
	pst, err := os.Stat(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		if t.ident != nil { // removed by another process (a reset without archive)
			t.ident, t.st, t.snapAt = nil, state{}, 0
			t.file.Drop()
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sessions: stat tape %s: %w", t.name, err)
	}
	if t.ident != nil && os.SameFile(pst, t.ident) && pst.Size() == t.st.Size {
		return nil // the common case: one stat, nothing new
	}
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sessions: open tape %s: %w", t.name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("sessions: stat tape %s: %w", t.name, err)
	}
	_, err = t.refreshLocked(f, fi)
	t.maybeSnapshotLocked()
	return err
}

// foldFile folds the complete lines of f in [from, to) into st and returns
// where the last complete line ends.
func (t *Tape) foldFile(f *os.File, from, to int64) (int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, from, to-from), int(min(to-from, 64<<10)))
	off := from
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			t.foldLine(line[:len(line)-1], off)
			off += int64(len(line))
			t.st.Size = off
		}
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return off, fmt.Errorf("sessions: read tape %s: %w", t.name, err)
		}
	}
}

// foldWritten folds the entries this process just wrote as buf at offset
// base, from what it knows of them rather than by parsing the lines again.
func (t *Tape) foldWritten(ds []draft, es []Entry, buf []byte, base int64) {
	off := base
	for i, e := range es {
		n := int64(bytes.IndexByte(buf[off-base:], '\n')) + 1
		t.st.add(header{id: e.ID, kind: e.Kind, payload: ds[i].p}, off, n)
		off += n
		t.st.Size = off
	}
}

// foldLine adds one line (without its newline) at off to the summary.
// Lines that do not parse are skipped with a warning — a torn line after
// a crash is expected, never an error.
func (t *Tape) foldLine(line []byte, off int64) {
	h, err := peekLine(line)
	if errors.Is(err, errBlankLine) {
		return
	}
	if err != nil {
		t.store.log.Warn("sessions: skipping invalid tape line", "tape", t.name, "offset", off, "error", err)
		return
	}
	t.st.add(h, off, int64(len(line))+1)
}

// maybeSnapshotLocked writes the snapshot when the tape grew enough since
// the last one. t.mu must be held.
func (t *Tape) maybeSnapshotLocked() {
	if t.path != "" && t.st.Size-t.snapAt >= snapshotEvery {
		t.writeSnapshot()
	}
}

// commit writes queued entries; called by the group-commit goroutine.
// Errors are logged and the entries retried on the next commit.
func (t *Tape) commit() {
	if t.memory() {
		return
	}
	if _, err := t.appendDrafts(nil, false, nil); err != nil && !errors.Is(err, ErrClosed) {
		return // logged by writeFailed; requeued
	}
}

// Flush writes every entry queued by AppendAsync and fsyncs the file, for
// callers that need them durable now (before handing a tape to another
// process, say). It is a no-op for memory-only tapes.
func (t *Tape) Flush() error {
	if t.memory() {
		return nil
	}
	if _, err := t.appendDrafts(nil, false, nil); err != nil {
		return err
	}
	if t.pg != nil {
		return nil // a committed transaction is durable
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ident == nil {
		return nil
	}
	f, _, _, err := t.file.Lock()
	if err != nil {
		return fmt.Errorf("sessions: open tape %s: %w", t.name, err)
	}
	defer t.file.Unlock()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sessions: fsync tape %s: %w", t.name, err)
	}
	return nil
}

// close flushes, snapshots and closes the file; later appends fail with
// ErrClosed.
func (t *Tape) close() error {
	if t.pg != nil {
		err := t.Flush()
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		return err
	}
	if t.path == "" {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		return nil
	}
	err := t.Flush()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if t.ident != nil && t.st.Size != t.snapAt {
		t.writeSnapshot()
	}
	if cerr := t.file.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("sessions: close tape %s: %w", t.name, cerr)
	}
	return err
}

// load summarises the tape file, if any: from its snapshot plus what was
// appended after it, else by one streaming pass that writes the snapshot.
func (t *Tape) load() error {
	if t.pg != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		if err := t.pgRefreshLocked(true); err != nil {
			t.store.log.Warn("sessions: loading a tape", "tape", t.name, "error", err)
		}
		return nil
	}
	if t.path == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sessions: open tape %s: %w", t.name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("sessions: stat tape %s: %w", t.name, err)
	}
	torn, err := t.refreshLocked(f, fi)
	if err != nil {
		return err
	}
	if torn {
		t.warnTorn(f)
	}
	if t.st.Size != t.snapAt {
		t.writeSnapshot()
	}
	return nil
}

// warnTorn says, once at open, that the tape ends in a line that does not
// parse (a crash tore it); the next append ends it and it is skipped. A
// good line that only lacks its newline is kept, silently.
func (t *Tape) warnTorn(f *os.File) {
	fi, err := f.Stat()
	if err != nil || fi.Size()-t.st.Size > 64<<20 {
		return
	}
	frag := make([]byte, fi.Size()-t.st.Size)
	if _, err := f.ReadAt(frag, t.st.Size); err != nil {
		return
	}
	if _, err := peekLine(frag); err != nil {
		t.store.log.Warn("sessions: skipping torn last tape line", "tape", t.path, "offset", t.st.Size, "error", err)
	}
}

// source is a consistent view of the tape for one reader: st summarises
// what it holds. Positions are byte offsets for a file and a memory tape,
// row numbers for PostgreSQL; a line's end is where the next one starts.
type source struct {
	r    io.ReaderAt // file and memory tapes: the bytes [0, size)
	size int64
	st   state
	f    *os.File
	pg   *pgSource
}

func (s *source) close() {
	if s.f != nil {
		s.f.Close()
	}
}

// forward calls fn for each line from position from on, oldest first,
// until fn returns false.
func (s *source) forward(from int64, fn func(pos, end int64, line []byte) bool) error {
	if s.pg != nil {
		return s.pg.forward(from, fn)
	}
	return scanForward(s.r, from, s.size, func(off int64, line []byte) bool {
		return fn(off, off+int64(len(line))+1, line)
	})
}

// backward calls fn for each line, newest first, until fn returns false.
func (s *source) backward(fn func(pos, end int64, line []byte) bool) error {
	if s.pg != nil {
		return s.pg.backward(fn)
	}
	return scanBackward(s.r, 0, s.size, func(off int64, line []byte) bool {
		return fn(off, off+int64(len(line))+1, line)
	})
}

// open catches up and returns a view to read from. The file is opened
// here and checked to be the one st describes, so a concurrent reset by
// another process cannot mix two files.
func (t *Tape) open() (*source, error) {
	if t.pg != nil {
		if err := t.refresh(); err != nil {
			return nil, err
		}
		t.mu.Lock()
		st := t.st
		t.mu.Unlock()
		return &source{st: st, pg: &pgSource{pool: t.pg.s.pool, name: t.pg.name, max: st.Size}}, nil
	}
	if t.path == "" {
		t.mu.Lock()
		defer t.mu.Unlock()
		return &source{r: bytes.NewReader(t.mem), size: t.st.Size, st: t.st}, nil
	}
	for range 10 {
		if err := t.refresh(); err != nil {
			return nil, err
		}
		f, err := os.Open(t.path)
		if errors.Is(err, fs.ErrNotExist) {
			t.mu.Lock()
			gone := t.ident == nil
			t.mu.Unlock()
			if gone {
				return &source{r: bytes.NewReader(nil)}, nil
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sessions: open tape %s: %w", t.name, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("sessions: stat tape %s: %w", t.name, err)
		}
		t.mu.Lock()
		ok := t.ident != nil && os.SameFile(fi, t.ident)
		st := t.st
		t.mu.Unlock()
		if ok {
			return &source{r: f, size: st.Size, st: st, f: f}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("sessions: tape %s keeps being replaced", t.name)
}

// reset empties the tape, first moving its file to an archive named
// <file>.<stamp>.bak when stamp is set. mustArchive makes an archive even
// when no file exists yet (the main tape always reports one). It returns
// the archive path, "" when none was made. On an archive failure nothing is
// reset. It runs under the file lock, so another process's append lands
// wholly before or after it.
func (t *Tape) reset(stamp string, mustArchive bool) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", ErrClosed
	}
	queued := t.takePending()
	if t.pg != nil {
		if len(queued) > 0 {
			if _, err := t.writeLocked(queued, nil, false, nil); err != nil && stamp != "" {
				t.requeue(queued)
				return "", err
			}
		}
		return t.pgResetLocked(stamp, mustArchive)
	}
	if t.path == "" {
		t.mem, t.st = nil, state{}
		return "", nil
	}
	if len(queued) > 0 {
		if _, err := t.writeLocked(queued, nil, false, nil); err != nil && stamp != "" {
			t.requeue(queued)
			return "", err
		}
	}
	f, _, _, err := t.file.Lock()
	if err != nil {
		return "", fmt.Errorf("sessions: open tape %s: %w", t.name, err)
	}
	_ = f.Sync()
	var archived string
	if stamp != "" {
		archived, err = archiveFile(t.path, stamp, mustArchive)
		if err != nil {
			t.file.Unlock()
			return "", fmt.Errorf("sessions: archive tape %s: %w", t.name, err)
		}
	} else if err := os.Remove(t.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.file.Unlock()
		return "", fmt.Errorf("sessions: reset tape %s: %w", t.name, err)
	}
	_ = os.Remove(t.snapshotPath())
	sharedfile.SyncDir(filepath.Dir(t.path))
	t.file.Unlock()
	t.file.Drop()
	t.ident, t.st, t.snapAt = nil, state{}, 0
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
