package console

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/audit"
)

// Call is one audited call as the console shows it: a line of the audit
// log, decoded.
type Call struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	audit.Fields
}

// parseCall decodes one audit line; ok is false for a line that is not a
// call record (torn, foreign).
func parseCall(line []byte) (Call, bool) {
	var c Call
	if err := json.Unmarshal(line, &c); err != nil || c.Tool == "" || c.Time.IsZero() {
		return Call{}, false
	}
	return c, true
}

// Filter selects calls. Zero fields match everything.
type Filter struct {
	Principal string
	Profile   string
	Tool      string // a prefix, so "fs." selects every fs tool
	Outcome   string // "ok" or "error"
	Since     time.Time
	Until     time.Time
	// Text is searched for, case-insensitively, in the arguments and the
	// error message.
	Text string
}

// Match reports whether c passes f.
func (f *Filter) Match(c *Call) bool {
	switch {
	case f.Principal != "" && c.Principal != f.Principal,
		f.Profile != "" && c.Profile != f.Profile,
		f.Tool != "" && !strings.HasPrefix(c.Tool, f.Tool),
		f.Outcome != "" && c.Outcome != f.Outcome,
		!f.Since.IsZero() && c.Time.Before(f.Since),
		!f.Until.IsZero() && c.Time.After(f.Until):
		return false
	}
	if f.Text != "" {
		t := strings.ToLower(f.Text)
		return strings.Contains(strings.ToLower(string(c.Args)), t) || strings.Contains(strings.ToLower(c.Error), t)
	}
	return true
}

// feed follows the audit log: it keeps the last max calls in memory (a
// ring), and tells subscribers of new ones as the servers write them. It
// polls the directory (several processes write it, and they may rotate
// it), following the file it has open to its end after a rotation before
// it opens the new one.
type feed struct {
	dir  string
	max  int
	poll time.Duration
	log  *slog.Logger

	mu   sync.Mutex
	ring []Call // oldest first, at most max
	subs map[chan Call]struct{}

	// pg, when set, is the PostgreSQL log followed instead of files.
	pg *pgTail

	// The tail, touched by the poll goroutine only.
	f       *os.File
	off     int64
	partial []byte
	buf     []byte // drain's read buffer, kept: it runs every tick

	quit chan struct{}
	done chan struct{}
}

// subscriberBuffer bounds what waits for one slow subscriber; past it the
// subscriber misses calls (and reloads, see console.js).
const subscriberBuffer = 256

// maxLine bounds one audit line read (records cut arguments to
// max_arg_bytes; this only guards against a foreign file).
const maxLine = 4 << 20

func newFeed(dir string, max int, poll time.Duration, log *slog.Logger) *feed {
	if log == nil {
		log = slog.Default()
	}
	return &feed{dir: dir, max: max, poll: poll, log: log, subs: map[chan Call]struct{}{}, quit: make(chan struct{}), done: make(chan struct{})}
}

// start loads the newest calls from the files and starts following the
// log.
func (fd *feed) start() {
	if fd.pg != nil {
		fd.ring = fd.pgHistory()
		go fd.loop()
		return
	}
	fd.ring = fd.loadHistory()
	fd.openCurrent(true)
	go fd.loop()
}

func (fd *feed) close() {
	close(fd.quit)
	<-fd.done
	if fd.f != nil {
		fd.f.Close()
	}
}

// logFiles are the audit files, oldest first: rotated ones, then
// audit.jsonl.
func logFiles(dir string) []string {
	names, _ := audit.Rotated(dir)
	slices.Reverse(names)
	out := make([]string, 0, len(names)+1)
	for _, n := range names {
		out = append(out, filepath.Join(dir, n))
	}
	return append(out, filepath.Join(dir, audit.FileName))
}

// loadHistory reads the last max calls, newest files first, holding no
// more than max at a time.
func (fd *feed) loadHistory() []Call {
	files := logFiles(fd.dir)
	var out []Call
	for i := len(files) - 1; i >= 0 && len(out) < fd.max; i-- {
		var part []Call
		keep := fd.max - len(out)
		// The current file is read up to where following it starts.
		_ = scanFile(files[i], func(c Call) bool {
			part = append(part, c)
			if len(part) > 2*keep {
				part = append(part[:0], part[len(part)-keep:]...)
			}
			return true
		})
		if len(part) > keep {
			part = part[len(part)-keep:]
		}
		out = append(part, out...)
	}
	return out
}

// scanFile calls fn for each call in the file at path, oldest first, until
// fn returns false.
func scanFile(path string, fn func(Call) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			if c, ok := parseCall(line); ok && !fn(c) {
				return nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readLine reads one line, skipping (not returning) the rest of a line
// longer than maxLine.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) <= maxLine {
			buf = append(buf, chunk...)
		} else {
			buf = buf[:0:0]
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSpace(buf), err
	}
}

// openCurrent opens audit.jsonl to follow it, from its end (atEnd: its
// calls are in the ring already) or from its start (a new file after a
// rotation).
func (fd *feed) openCurrent(atEnd bool) {
	f, err := os.Open(filepath.Join(fd.dir, audit.FileName))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fd.log.Warn("console: open the audit log", "error", err)
		}
		return
	}
	fd.f, fd.off, fd.partial = f, 0, nil
	if atEnd {
		// Whole lines only: a half-written last line is read with its end.
		st, err := f.Stat()
		if err == nil {
			fd.off = st.Size()
		}
		fd.off = fd.lineStart(fd.off)
	}
}

// lineStart moves off back to the start of the line it is in, so a line
// half written when the history was loaded is read whole later. The
// history skipped it (not JSON).
func (fd *feed) lineStart(off int64) int64 {
	if off == 0 {
		return 0
	}
	var b [1]byte
	if _, err := fd.f.ReadAt(b[:], off-1); err == nil && b[0] == '\n' {
		return off
	}
	buf := make([]byte, 4096)
	for pos := off; pos > 0; {
		n := int64(len(buf))
		if n > pos {
			n = pos
		}
		pos -= n
		if _, err := fd.f.ReadAt(buf[:n], pos); err != nil {
			return off
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return pos + int64(i) + 1
		}
	}
	return 0
}

func (fd *feed) loop() {
	defer close(fd.done)
	t := time.NewTicker(fd.poll)
	defer t.Stop()
	for {
		select {
		case <-fd.quit:
			return
		case <-t.C:
			fd.tick()
		}
	}
}

// tick reads what was appended since the last tick, then checks whether
// the log was rotated (the path names another file) or truncated.
func (fd *feed) tick() {
	if fd.pg != nil {
		fd.pgTick()
		return
	}
	if fd.f == nil {
		fd.openCurrent(false)
		if fd.f == nil {
			return
		}
	}
	fd.drain()
	cur, err := os.Stat(filepath.Join(fd.dir, audit.FileName))
	if err != nil {
		return // rotated, the new one not yet made
	}
	mine, err := fd.f.Stat()
	if err != nil {
		return
	}
	if !os.SameFile(cur, mine) {
		fd.drain() // the rotated file's last lines
		fd.f.Close()
		fd.f = nil
		fd.openCurrent(false)
		if fd.f != nil {
			fd.drain()
		}
		return
	}
	if mine.Size() < fd.off { // truncated by hand
		fd.off, fd.partial = 0, nil
	}
}

// drain reads complete lines from the followed file's offset to its end.
func (fd *feed) drain() {
	if fd.buf == nil {
		fd.buf = make([]byte, 64<<10)
	}
	buf := fd.buf
	for {
		n, err := fd.f.ReadAt(buf, fd.off)
		if n > 0 {
			fd.off += int64(n)
			data := buf[:n]
			for len(data) > 0 {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					if len(fd.partial)+len(data) <= maxLine {
						fd.partial = append(fd.partial, data...)
					} else {
						fd.partial = fd.partial[:0]
					}
					break
				}
				line := data[:i]
				if len(fd.partial) > 0 {
					line = append(fd.partial, line...)
					fd.partial = fd.partial[:0]
				}
				if c, ok := parseCall(line); ok {
					fd.add(c)
				}
				data = data[i+1:]
			}
		}
		if err != nil || n < len(buf) {
			return
		}
	}
}

// add appends c to the ring and passes it to the subscribers.
func (fd *feed) add(c Call) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if len(fd.ring) >= fd.max {
		// Drop the oldest quarter at once: amortised O(1) per call.
		drop := max(1, fd.max/4)
		fd.ring = append(fd.ring[:0], fd.ring[drop:]...)
	}
	if n := len(fd.ring); n > 0 && fd.ring[n-1].Seq > c.Seq {
		// A PostgreSQL row that became visible late: keep the ring in
		// Seq order (bySeq searches it).
		i, _ := slices.BinarySearchFunc(fd.ring, c.Seq, func(x Call, s int64) int { return cmp.Compare(x.Seq, s) })
		fd.ring = slices.Insert(fd.ring, i, c)
	} else {
		fd.ring = append(fd.ring, c)
	}
	for ch := range fd.subs {
		select {
		case ch <- c:
		default: // a slow subscriber misses it
		}
	}
}

// lastSeq is the seq of the newest call in the ring; 0 when empty.
func (fd *feed) lastSeq() int64 {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if len(fd.ring) == 0 {
		return 0
	}
	return fd.ring[len(fd.ring)-1].Seq
}

// subscribeAfter subscribes and, in the same critical section, returns
// the calls the ring holds past seq after: a page rendered from the ring
// and then subscribed would miss a call added between the two (the
// console's browser test caught a completed call that never showed).
func (fd *feed) subscribeAfter(after int64) (chan Call, []Call, func()) {
	ch, cancel := fd.subscribe()
	fd.mu.Lock()
	defer fd.mu.Unlock()
	var backlog []Call
	if after > 0 {
		for i := len(fd.ring) - 1; i >= 0 && fd.ring[i].Seq > after && len(backlog) < subscriberBuffer; i-- {
			backlog = append(backlog, fd.ring[i])
		}
		slices.Reverse(backlog)
	}
	return ch, backlog, cancel
}

// subscribe returns a channel of new calls and its cancel function.
func (fd *feed) subscribe() (chan Call, func()) {
	ch := make(chan Call, subscriberBuffer)
	fd.mu.Lock()
	fd.subs[ch] = struct{}{}
	fd.mu.Unlock()
	return ch, func() {
		fd.mu.Lock()
		delete(fd.subs, ch)
		fd.mu.Unlock()
	}
}

// recent returns up to limit calls of the ring matching f, newest first.
func (fd *feed) recent(f *Filter, limit int) []Call {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	var out []Call
	for i := len(fd.ring) - 1; i >= 0 && len(out) < limit; i-- {
		if f.Match(&fd.ring[i]) {
			out = append(out, fd.ring[i])
		}
	}
	return out
}

// oldest is the time of the oldest call in the ring; zero when empty.
func (fd *feed) oldest() time.Time {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if len(fd.ring) == 0 {
		return time.Time{}
	}
	return fd.ring[0].Time
}

// bySeq finds a call in the ring.
func (fd *feed) bySeq(seq int64) (Call, bool) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	i, ok := slices.BinarySearchFunc(fd.ring, seq, func(c Call, s int64) int { return cmp.Compare(c.Seq, s) })
	if ok {
		return fd.ring[i], true
	}
	return Call{}, false
}

// scanLog calls fn for every call in the files written at or after
// since, oldest first (files last modified before since are skipped),
// until fn returns false. It reads the files, not the ring, so it sees
// as far back as the log is kept, in bounded memory.
func scanLog(dir string, since time.Time, fn func(Call) bool) {
	stop := false
	for _, path := range logFiles(dir) {
		if st, err := os.Stat(path); err != nil || (!since.IsZero() && st.ModTime().Before(since)) {
			continue
		}
		_ = scanFile(path, func(c Call) bool {
			if !fn(c) {
				stop = true
				return false
			}
			return true
		})
		if stop {
			return
		}
	}
}

// Who is a recorded principal as the pages show it. A call through an
// OAuth token is recorded as issuer#sub (auth.Principal.ID), one through
// a static token by the token's name.
type Who struct {
	// ID is the principal as recorded.
	ID string `json:"id"`
	// Issuer and Subject are an OAuth principal's; Host is the issuer's
	// host, shown beside the subject. Empty for a static token.
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
	Host    string `json:"host,omitempty"`
	// Name is the principal's name for people, as recorded (an OAuth
	// principal's name_claim); shown in place of the subject.
	Name string `json:"name,omitempty"`
}

// whoNamed is whoOf with the recorded name for people.
func whoNamed(id, name string) Who {
	w := whoOf(id)
	w.Name = name
	return w
}

// whoOf splits a recorded principal. An issuer URL has no fragment, so
// the first "#" after one ends it; a token name is anything else.
func whoOf(id string) Who {
	iss, sub, ok := strings.Cut(id, "#")
	if !ok || sub == "" {
		return Who{ID: id}
	}
	u, err := url.Parse(iss)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return Who{ID: id}
	}
	return Who{ID: id, Issuer: iss, Subject: sub, Host: u.Host}
}

// callEvent is a call as the live table's event stream sends it.
type callEvent struct {
	*Call
	Who Who `json:"who"`
}
