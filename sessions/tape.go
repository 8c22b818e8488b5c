package sessions

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Tape is one append-only log: a session's main tape or its spill sidecar.
// It keeps no entries in memory, only a summary of the stored lines (see
// Summary): every reader streams from its backend, and every append goes
// through the backend, which first picks up what other processes or
// replicas appended since, so ids are assigned only then and several
// processes can share a tape. The Tape does what every backend shares
// (ids, the summary, the AppendAsync queue, settings); its TapeBackend
// stores lines. All methods are safe for concurrent use.
type Tape struct {
	name  string
	store *Store
	mem   bool // a temp/ session's tape: in this process only

	// mu serialises this process's writes and every call to b, and
	// guards the fields below. It is held across a write and its fsync,
	// never across a reader's scan.
	mu      sync.Mutex
	b       TapeBackend
	closed  bool
	st      Summary
	failing bool // the last write failed; log once until one succeeds

	// qmu guards pending, so AppendAsync never waits for the disk.
	qmu     sync.Mutex
	pending []draft
}

// draft is an entry before it has an id: its kind, its encoded objects,
// its date and, for anchors and events (which feed the tape's summary and
// are returned to the caller), their decoded copies.
type draft struct {
	kind    string
	payload []byte
	meta    []byte
	date    string
	p, m    map[string]any
	// line, when set, is the draft's whole tape line but for its
	// `{"id":N` start, after lineRoom bytes left for it; payload is then
	// unset (chunkDraft: a large spill chunk is not copied again).
	line []byte
}

// newTape makes a tape: in memory for a temp/ session, else in the
// store's backend.
func newTape(s *Store, name string, temp bool) *Tape {
	t := &Tape{name: name, store: s, mem: temp}
	if temp {
		t.b = &memTape{}
	} else {
		t.b = s.backend.Tape(name)
	}
	return t
}

// Name is the tape's name, the file name without ".jsonl".
func (t *Tape) Name() string { return t.name }

// Path is the tape's file, or "" for a memory-only (temp/) tape or one
// kept by a backend without files (PostgreSQL).
func (t *Tape) Path() string {
	if p, ok := t.b.(interface{ Path() string }); ok {
		return p.Path()
	}
	return ""
}

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
	if t.mem {
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

// appendDrafts writes the queued entries and then ds with a single
// backend append, after catching up with what others appended. When cond
// is set it is asked first, with the caught-up summary, and nothing of ds
// is written when it returns false (EnsureBootstrap's "only if no anchor
// yet" across processes). It asks for durability when forceSync is set or
// any entry needs it. It returns ds as entries, with their ids.
func (t *Tape) appendDrafts(ds []draft, forceSync bool, cond func(*state) bool) ([]Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	queued := t.takePending()
	es, stored, err := t.writeLocked(queued, ds, forceSync, cond)
	if err != nil && !stored {
		t.requeue(queued)
		return nil, err
	}
	return es, err
}

// writeLocked does appendDrafts' work; t.mu must be held. stored reports
// whether the entries reached the backend, even when err reports a
// failure after that (an fsync).
func (t *Tape) writeLocked(queued, ds []draft, forceSync bool, cond func(*state) bool) (es []Entry, stored bool, err error) {
	if len(queued) == 0 && len(ds) == 0 {
		return nil, false, nil
	}
	sync := forceSync || t.store.opts.SyncCommits && len(ds) == 0
	for _, d := range queued {
		sync = sync || needsSync(d)
	}
	for _, d := range ds {
		sync = sync || needsSync(d)
	}
	var all []Entry
	err = t.b.Append(&t.st, func(cur *Summary) []Line {
		d := ds
		if cond != nil && !cond(&cur.st) {
			d = nil
		}
		var lines []Line
		lines, all = encodeDrafts(cur.st.LastID, queued, d)
		return lines
	}, sync)
	stored = len(all) > 0 && t.st.st.LastID >= all[len(all)-1].ID
	if err != nil {
		if !stored {
			return nil, false, t.writeFailed(err)
		}
		return all[len(queued):], true, err
	}
	if t.failing {
		t.store.log.Info("sessions: tape writes recovered", "tape", t.name)
		t.failing = false
	}
	if len(all) == 0 {
		return nil, false, nil
	}
	return all[len(queued):], true, nil
}

// writeFailed logs the first of a run of failures and returns err.
func (t *Tape) writeFailed(err error) error {
	if !t.failing {
		t.store.log.Warn("sessions: tape write failed", "tape", t.name, "error", err)
	}
	t.failing = true
	return err
}

// encodeDrafts assigns ids after last to a and then b and encodes their
// lines.
func encodeDrafts(last int, a, b []draft) ([]Line, []Entry) {
	n := len(a) + len(b)
	lines := make([]Line, 0, n)
	es := make([]Entry, 0, n)
	id := last
	for _, ds := range [2][]draft{a, b} {
		for _, d := range ds {
			id++
			text := d.line
			if text != nil {
				text = withID(text, id)
			} else {
				text = encodeLine(id, d.kind, d.payload, d.meta, d.date)
			}
			lines = append(lines, Line{
				Text: text,
				h:    header{id: id, kind: d.kind, payload: d.p},
			})
			es = append(es, Entry{ID: id, Kind: d.kind, Payload: d.p, Meta: d.m, Date: d.date})
		}
	}
	return lines, es
}

// refresh catches up with the backend without writing; readers call it.
// It also writes what AppendAsync queued, so a reader sees it with its id.
func (t *Tape) refresh() error { return t.refreshAt(true) }

// refreshAt is refresh; fresh=false lets the backend answer from a
// summary a short interval old: Settings, asked on every request, then
// costs a stat(2) at most four times a second instead of once per call
// (5% of an echo call's CPU).
func (t *Tape) refreshAt(fresh bool) error {
	if t.mem {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil // readers still read what is there
	}
	if q := t.takePending(); len(q) > 0 {
		if _, stored, err := t.writeLocked(q, nil, false, nil); err != nil {
			if !stored {
				t.requeue(q)
			}
			t.store.log.Warn("sessions: writing queued entries before a read", "tape", t.name, "error", err)
		}
		return nil // the append caught up
	}
	return t.b.Refresh(&t.st, fresh)
}

// commit writes queued entries; called by the group-commit goroutine.
// Errors are logged and the entries retried on the next commit.
func (t *Tape) commit() {
	if t.mem {
		return
	}
	if _, err := t.appendDrafts(nil, false, nil); err != nil && !errors.Is(err, ErrClosed) {
		return // logged by writeFailed; requeued
	}
}

// Flush writes every entry queued by AppendAsync and makes the tape
// durable (an fsync for a file), for callers that need it now (before
// handing a tape to another process, say). It is a no-op for memory-only
// tapes.
func (t *Tape) Flush() error {
	if t.mem {
		return nil
	}
	if _, err := t.appendDrafts(nil, false, nil); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.Sync()
}

// close flushes and closes the backend's tape; later appends fail with
// ErrClosed.
func (t *Tape) close() error {
	err := t.Flush()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if cerr := t.b.Close(&t.st); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// load summarises the stored tape, if any.
func (t *Tape) load() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.Load(&t.st)
}

// source is a consistent view of the tape for one reader: st summarises
// what it holds.
type source struct {
	Source
	st state
}

// open catches up and returns a view to read from.
func (t *Tape) open() (*source, error) {
	if err := t.refresh(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	src, err := t.b.Open(&t.st)
	if err != nil {
		return nil, err
	}
	return &source{Source: src, st: t.st.st}, nil
}

// reset empties the tape, first moving it to an archive (for a file,
// <file>.<stamp>.bak) when stamp is set. mustArchive makes an archive even
// when nothing was stored yet (the main tape always reports one). It
// returns the archive's name, "" when none was made. On an archive failure
// nothing is reset.
func (t *Tape) reset(stamp string, mustArchive bool) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", ErrClosed
	}
	if queued := t.takePending(); len(queued) > 0 {
		if _, stored, err := t.writeLocked(queued, nil, false, nil); err != nil && !stored && stamp != "" {
			t.requeue(queued)
			return "", err
		}
	}
	return t.b.Reset(&t.st, stamp, mustArchive)
}
