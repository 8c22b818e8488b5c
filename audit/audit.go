// Package audit keeps bub-mcp's audit log: one JSON line per tool call
// (when, who, through which profile, client and transport, which tool with
// which arguments, the outcome and how long it took), appended to
// $BUB_HOME/audit/audit.jsonl. It is kept apart from the session tapes on
// purpose: no tool reads or resets it, and a tape holds only what Bub
// itself puts there.
//
// # Tamper evidence
//
// Records are hash-chained (chain.go): each carries its seq and the
// SHA-256 of the line before it, across rotations, and audit.head keeps
// the chain's end, so [Verify] finds a record removed, altered or moved
// and a tail cut off. On the local environment bash and run_code run as
// the user and can still delete or rewrite the files: the chain shows
// that it happened, it cannot prevent it (whoever can write the directory
// can also forge a whole new chain). The sandbox does not show $BUB_HOME
// to tools, and the PostgreSQL store keeps the log out of their reach.
//
// # Durability
//
// Records are queued and written by one background goroutine every
// [Options.CommitInterval] (group commit): one write(2) per interval, under
// an exclusive flock so several processes sharing a $BUB_HOME interleave
// whole lines. A crash of the process loses at most the records of the
// last interval; with [Options.Sync] unset an OS crash or power loss can
// also lose what the page cache had not written back. [Log.Close] writes
// everything and fsyncs.
//
// # Rotation and retention
//
// When audit.jsonl reaches [Options.MaxFileBytes] it is renamed to
// audit-<UTC stamp>.jsonl and a new one is started; then rotated files
// beyond [Options.KeepFiles], or older than [Options.KeepDays], are
// removed. Rotation happens under the same lock as appends, so processes
// sharing the directory rotate once, not once each.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/internal/sharedfile"
)

// Defaults, one per setting (see bub.toml.example, [audit]).
const (
	DefaultMaxArgBytes    = 4 << 10
	DefaultMaxFileBytes   = 64 << 20
	DefaultKeepFiles      = 10
	DefaultKeepDays       = 90
	DefaultCommitInterval = 50 * time.Millisecond
	// maxQueuedBytes bounds what waits in memory between commits: past it
	// the recording goroutine writes the batch itself instead of letting
	// the queue grow.
	maxQueuedBytes = 8 << 20
)

// FileName is the log being written; rotated files are
// audit-<stamp>.jsonl beside it.
const FileName = "audit.jsonl"

// Options configure a [Log]. Zero values mean the defaults above.
type Options struct {
	// Dir holds the log ($BUB_HOME/audit); required.
	Dir string
	// MaxArgBytes cuts each call's arguments (and error message) to this
	// many bytes; the record says so and keeps the original size.
	MaxArgBytes int
	// MaxFileBytes rotates the log once it is this large.
	MaxFileBytes int64
	// KeepFiles is how many rotated files are kept; negative keeps all.
	KeepFiles int
	// KeepDays removes rotated files older than this many days; negative
	// keeps them regardless of age.
	KeepDays int
	// CommitInterval is the longest a record waits in memory.
	CommitInterval time.Duration
	// Sync fsyncs every commit, so an OS crash also loses at most one
	// interval.
	Sync bool
	// Logger receives write failures; nil means slog.Default().
	Logger *slog.Logger
	// PostgresDSN, when set, writes the records to the bub_audit table of
	// that database instead of files (Dir is then unused); replicas share
	// one log. KeepDays prunes it; MaxFileBytes and KeepFiles do not apply.
	PostgresDSN string
}

// Record is one audited call.
type Record struct {
	Time      time.Time
	Principal string
	// PrincipalName is the principal's name for people, when it differs
	// (an OAuth principal's name_claim).
	PrincipalName string
	Profile       string
	Client        string // "name/version" as the client reported it
	Transport     string
	Session       string
	RunID         string
	Mode          string // direct or command
	Tool          string
	Args          json.RawMessage
	// Outcome is "ok" or "error"; ErrorKind and Error say which error.
	Outcome   string
	ErrorKind string
	Error     string
	Duration  time.Duration
}

// line is a Record as written: its time, then its Fields.
type line struct {
	Time string `json:"time"`
	Fields
}

// Fields are an audit line's fields after its time, as written: what a
// reader of the log (the operator console) decodes beside the time and
// the chain's seq.
type Fields struct {
	Principal     string          `json:"principal,omitempty"`
	PrincipalName string          `json:"principal_name,omitempty"`
	Profile       string          `json:"profile"`
	Client        string          `json:"client,omitempty"`
	Transport     string          `json:"transport"`
	Session       string          `json:"session,omitempty"`
	RunID         string          `json:"run_id,omitempty"`
	Mode          string          `json:"mode,omitempty"`
	Tool          string          `json:"tool"`
	Args          json.RawMessage `json:"args"`
	ArgsBytes     int             `json:"args_bytes,omitempty"`
	ArgsTruncated bool            `json:"args_truncated,omitempty"`
	Outcome       string          `json:"outcome"`
	ErrorKind     string          `json:"error_kind,omitempty"`
	Error         string          `json:"error,omitempty"`
	DurationMS    float64         `json:"duration_ms"`
}

// Log is the audit log of one process. It is safe for concurrent use.
type Log struct {
	opts Options
	log  *slog.Logger
	file *sharedfile.File
	head headFile // the chain head, beside file
	pg   *pgSink  // nil: files

	wmu     sync.Mutex // serialises writes and rotation in this process
	failing bool
	wrote   bool // a batch was written: there is a file to fsync

	mu     sync.Mutex
	closed bool
	queue  [][]byte
	queued int
	kick   chan struct{}
	quit   chan struct{}
	done   chan struct{}
}

// Open prepares dir (mode 0700: arguments can be secrets) and starts the
// group-commit goroutine. The file itself is opened on the first commit.
func Open(opts Options) (*Log, error) {
	if opts.Dir == "" && opts.PostgresDSN == "" {
		return nil, errors.New("audit: no directory")
	}
	if opts.MaxArgBytes <= 0 {
		opts.MaxArgBytes = DefaultMaxArgBytes
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.KeepFiles == 0 {
		opts.KeepFiles = DefaultKeepFiles
	}
	if opts.KeepDays == 0 {
		opts.KeepDays = DefaultKeepDays
	}
	if opts.CommitInterval <= 0 {
		opts.CommitInterval = DefaultCommitInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Log{opts: opts, log: opts.Logger, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if opts.PostgresDSN != "" {
		pg, err := openPGSink(opts.PostgresDSN, opts.KeepDays)
		if err != nil {
			return nil, err
		}
		l.pg = pg
	} else {
		if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("audit: create %s: %w", opts.Dir, err)
		}
		l.file = sharedfile.New(filepath.Join(opts.Dir, FileName))
		l.head.path = filepath.Join(opts.Dir, HeadFileName)
	}
	go l.loop()
	return l, nil
}

// Dir is the directory the log is kept in; "" when it is in PostgreSQL.
func (l *Log) Dir() string {
	if l.pg != nil {
		return ""
	}
	return l.opts.Dir
}

// Record queues r for the next commit. It never waits for the disk unless
// the queue is over its bound; after Close it does nothing.
func (l *Log) Record(r Record) {
	b := l.encode(r)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	first := len(l.queue) == 0
	l.queue = append(l.queue, b)
	l.queued += len(b)
	over := l.queued >= maxQueuedBytes
	l.mu.Unlock()
	if over {
		l.commit()
		return
	}
	if first {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// encode renders r as one line, newline included.
func (l *Log) encode(r Record) []byte {
	ln := line{Time: r.Time.UTC().Format(time.RFC3339Nano), Fields: Fields{
		Principal: r.Principal, PrincipalName: r.PrincipalName, Profile: r.Profile, Client: r.Client,
		Transport: r.Transport, Session: r.Session, RunID: r.RunID, Mode: r.Mode, Tool: r.Tool,
		Outcome: r.Outcome, ErrorKind: r.ErrorKind, DurationMS: float64(r.Duration.Microseconds()) / 1000,
	}}
	ln.Args, ln.ArgsBytes, ln.ArgsTruncated = cutArgs(r.Args, l.opts.MaxArgBytes)
	if r.Error != "" {
		ln.Error = cutString(r.Error, l.opts.MaxArgBytes, len(r.Error))
	}
	var buf bytes.Buffer
	buf.Grow(256 + len(ln.Args))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ln); err != nil {
		// Only arguments that are not JSON fail (cutArgs leaves short
		// ones to the encoder, which checks and compacts them anyway):
		// keep them as a string.
		ln.Args = argsString(r.Args)
		buf.Reset()
		_ = enc.Encode(ln)
	}
	return buf.Bytes()
}

// CutArgs returns a call's arguments as the audit log keeps them, for
// other records of calls that show them "cut as audited" (the approvals
// queue): whole when they fit in limit bytes, else their first limit
// bytes as a JSON string, marked as cut; arguments that are not JSON as
// a string. n is the original size when they were cut, else 0. The
// result is always valid JSON.
func CutArgs(args json.RawMessage, limit int) (out json.RawMessage, n int) {
	out, n, _ = cutArgs(args, limit)
	if n == 0 && !json.Valid(out) {
		out = argsString(args)
	}
	return out, n
}

// argsString keeps arguments that are not JSON as a JSON string.
func argsString(args json.RawMessage) json.RawMessage {
	s, _ := json.Marshal(strings.ToValidUTF8(string(bytes.TrimSpace(args)), "\uFFFD"))
	return s
}

// cutArgs returns the arguments as written: compact JSON when they fit in
// limit bytes, else their first limit bytes as a JSON string, marked, with
// the original size. Arguments that are not JSON are kept as a string.
func cutArgs(args json.RawMessage, limit int) (json.RawMessage, int, bool) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		return json.RawMessage(`{}`), 0, false
	}
	if len(args) <= limit {
		// The encoder checks and compacts a RawMessage as it writes it;
		// encode keeps arguments it refuses as a string.
		return args, 0, false
	}
	// Compacting can at most remove whitespace: arguments far over the
	// limit are cut without being copied whole first (a 12 MiB call made
	// two 12 MiB copies here).
	if len(args) <= 4*limit && json.Valid(args) {
		var c bytes.Buffer
		if json.Compact(&c, args) == nil && c.Len() <= limit {
			return c.Bytes(), 0, false
		}
	}
	head := args
	if len(head) > limit+utf8.UTFMax {
		head = head[:limit+utf8.UTFMax]
	}
	s, _ := json.Marshal(cutString(string(head), limit, len(args)))
	return s, len(args), true
}

// cutString cuts s to at most limit bytes on a rune boundary and marks
// the cut.
func cutString(s string, limit, total int) string {
	if len(s) <= limit && len(s) == total {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	end := min(limit, len(s))
	for end > 0 && end < len(s) && !utf8.RuneStart(s[end]) {
		end--
	}
	return strings.ToValidUTF8(s[:end], "\uFFFD") + fmt.Sprintf("…[cut: %d of %d bytes]", end, total)
}

func (l *Log) loop() {
	defer close(l.done)
	for {
		select {
		case <-l.kick:
		case <-l.quit:
			l.commit()
			return
		}
		t := time.NewTimer(l.opts.CommitInterval)
		select {
		case <-t.C:
		case <-l.quit:
			t.Stop()
			l.commit()
			return
		}
		l.commit()
	}
}

// commit writes what is queued with one write(2), rotating first when the
// file is full. A failed write keeps the records queued for the next try.
func (l *Log) commit() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	batch := l.queue
	l.queue, l.queued = nil, 0
	l.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := l.write(batch)
	if err != nil {
		l.mu.Lock()
		l.queue = append(batch, l.queue...)
		for _, b := range batch {
			l.queued += len(b)
		}
		// A store that stays down must not grow the queue without end:
		// past four times the bound the oldest records go, and are counted.
		dropped := 0
		for l.queued > 4*maxQueuedBytes && len(l.queue) > 0 {
			l.queued -= len(l.queue[0])
			l.queue = l.queue[1:]
			dropped++
		}
		l.mu.Unlock()
		if dropped > 0 {
			l.log.Error("audit: records dropped while the log cannot be written", "dropped", dropped, "error", err)
		}
		if !l.failing {
			l.log.Warn("audit: write failed; records stay queued", "dir", l.opts.Dir, "error", err)
		}
		l.failing = true
		return err
	}
	if l.failing {
		l.log.Info("audit: writes recovered", "dir", l.opts.Dir)
		l.failing = false
	}
	return nil
}

func (l *Log) write(batch [][]byte) error {
	if l.pg != nil {
		return l.pg.write(batch)
	}
	f, st, _, err := l.file.Lock()
	if err != nil {
		return err
	}
	defer l.file.Unlock()
	h, note, err := l.chainHead(f, st.Size())
	if err != nil {
		return err
	}
	if st.Size() > 0 && st.Size() >= l.opts.MaxFileBytes {
		if err := l.rotate(h); err != nil {
			return err
		}
		l.file.Unlock()
		if f, st, _, err = l.file.Lock(); err != nil {
			return err
		}
		// Another process may have written the new file in between.
		var again string
		if h, again, err = l.chainHead(f, st.Size()); err != nil {
			return err
		}
		if note == "" {
			note = again
		}
	}
	n := 0
	for _, b := range batch {
		n += len(b) + 100 // the link: "seq", "prev" and a hash
	}
	buf, h := chain(make([]byte, 0, n), batch, h, note)
	if _, err := f.Write(buf); err != nil {
		return err
	}
	l.wrote = true
	h.size = st.Size() + int64(len(buf))
	if l.opts.Sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	// The records are written: a head that cannot be written must not
	// queue them again. The next commit finds the head behind the log
	// and follows the chain forward from it.
	if err := l.head.write(h, l.opts.Sync); err != nil {
		l.log.Warn("audit: write the chain head", "dir", l.opts.Dir, "error", err)
	}
	return nil
}

// chainHead is the head the next record links to, under the log's lock:
// the head file when it matches audit.jsonl (size bytes, open as f). When
// it does not, note is set to what was found, for the next record to
// carry and Verify to report:
//   - records written after the head (a process stopped between writing
//     the log and the head) are followed forward when they link to it;
//   - a log shorter than the head lost records: the chain continues from
//     the head, so the gap shows;
//   - without a head file the chain continues from the log's last record
//     (and starts at seq 1 when there is none: a new directory, or a log
//     written before records were chained).
func (l *Log) chainHead(f *os.File, size int64) (h head, note string, err error) {
	h, err = l.head.read()
	if err != nil {
		missing := errors.Is(err, errNoHead)
		last, lerr := l.lastRecord(f, size)
		if lerr != nil {
			return head{}, "", lerr
		}
		lh, ok := headOf(last)
		if !ok {
			if !missing {
				l.log.Warn("audit: chain head unreadable; the log has no chained record, starting the chain", "error", err)
				return head{size: size}, "the chain head was unreadable", nil
			}
			return head{size: size}, "", nil
		}
		l.log.Warn("audit: chain head missing or unreadable; continuing from the log's last record", "dir", l.opts.Dir, "error", err)
		lh.size = size
		return lh, "the chain head was missing or unreadable: records after seq " + strconv.FormatInt(lh.seq, 10) + " may have been removed", nil
	}
	switch {
	case h.size == size:
		return h, "", nil
	case size > h.size && size-h.size <= maxTail:
		// Follow records that link to the head.
		tail := make([]byte, size-h.size)
		if _, err := f.ReadAt(tail, h.size); err != nil && !errors.Is(err, io.EOF) {
			return head{}, "", err
		}
		for len(tail) > 0 {
			i := bytes.IndexByte(tail, '\n')
			if i < 0 {
				break
			}
			ln := tail[:i+1]
			var lk link
			if json.Unmarshal(ln, &lk) != nil || lk.Seq == nil || lk.Prev == nil || *lk.Seq != h.seq+1 || *lk.Prev != h.hash {
				break
			}
			h.seq, h.hash, h.size = *lk.Seq, lineHash(ln), h.size+int64(len(ln))
			tail = tail[i+1:]
		}
		if h.size == size {
			return h, "", nil
		}
	case size == 0:
		// A process stopped between rotating the log and writing the
		// head: the newest rotated file ends with the head's record.
		if last, err := l.lastRotated(); err == nil {
			if lh, ok := headOf(last); ok && lh.seq == h.seq && lh.hash == h.hash {
				h.size = 0
				return h, "", nil
			}
		}
	}
	l.log.Warn("audit: audit.jsonl does not end where the chain head says; continuing from the head", "dir", l.opts.Dir, "size", size, "head_size", h.size, "head_seq", h.seq)
	note = fmt.Sprintf("audit.jsonl was %d bytes where the chain head (seq %d) said %d: it was changed outside bub-mcp", size, h.seq, h.size)
	h.size = size
	return h, note, nil
}

// lastRecord is the last line of the log: of audit.jsonl (f, size bytes)
// or, when that is empty, of the newest rotated file.
func (l *Log) lastRecord(f *os.File, size int64) ([]byte, error) {
	if size > 0 {
		return lastLine(f, size)
	}
	last, err := l.lastRotated()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return last, err
}

// lastRotated is the last line of the newest rotated file; fs.ErrNotExist
// when there is none.
func (l *Log) lastRotated() ([]byte, error) {
	names, err := Rotated(l.opts.Dir)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fs.ErrNotExist
	}
	f, err := os.Open(filepath.Join(l.opts.Dir, names[0]))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return lastLine(f, st.Size())
}

// rotate renames the full log away (under the lock), prunes old files and
// writes the head for the new, empty file: h with size 0 and, when
// pruning removed files, the first seq still kept. The caller reads it
// back once it holds the new file's lock.
func (l *Log) rotate(h head) error {
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	dst := filepath.Join(l.opts.Dir, "audit-"+stamp+".jsonl")
	if err := os.Rename(l.file.Path(), dst); err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	sharedfile.SyncDir(l.opts.Dir)
	if l.prune() {
		h.first = l.oldestSeq(h.seq + 1)
	}
	h.size = 0
	if err := l.head.write(h, l.opts.Sync); err != nil {
		l.log.Warn("audit: write the chain head", "dir", l.opts.Dir, "error", err)
	}
	return nil
}

// oldestSeq is the seq of the oldest chained record of the rotated
// files (files written before the chain are skipped), or next when they
// have none (the next record is then the oldest).
func (l *Log) oldestSeq(next int64) int64 {
	names, err := Rotated(l.opts.Dir)
	if err != nil {
		return next
	}
	slices.Reverse(names) // oldest first
	for _, name := range names {
		if seq, ok := firstSeq(filepath.Join(l.opts.Dir, name)); ok {
			return seq
		}
	}
	return next
}

// firstSeq is the seq of the first chained record in the file at path.
func firstSeq(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		ln, err := r.ReadBytes('\n')
		if h, ok := headOf(ln); ok {
			return h.seq, true
		}
		if err != nil {
			return 0, false
		}
	}
}

// prune removes rotated files beyond KeepFiles and older than KeepDays,
// and reports whether it removed any.
func (l *Log) prune() bool {
	names, err := Rotated(l.opts.Dir)
	if err != nil {
		l.log.Warn("audit: list rotated files", "dir", l.opts.Dir, "error", err)
		return false
	}
	removed := false
	cutoff := time.Now().AddDate(0, 0, -l.opts.KeepDays)
	for i, name := range names { // newest first
		path := filepath.Join(l.opts.Dir, name)
		drop := l.opts.KeepFiles >= 0 && i >= l.opts.KeepFiles
		if !drop && l.opts.KeepDays > 0 {
			if st, err := os.Stat(path); err == nil && st.ModTime().Before(cutoff) {
				drop = true
			}
		}
		if drop {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.log.Warn("audit: remove old file", "file", path, "error", err)
			} else {
				removed = true
			}
		}
	}
	return removed
}

// Rotated lists the rotated log files in dir, newest first.
func Rotated(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, "audit-") && strings.HasSuffix(n, ".jsonl") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out, nil
}

// Flush writes every queued record now and fsyncs the file.
func (l *Log) Flush() error {
	if err := l.commit(); err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if !l.wrote || l.pg != nil { // a committed insert is durable
		return nil
	}
	f, _, _, err := l.file.Lock()
	if err != nil {
		return err
	}
	defer l.file.Unlock()
	return f.Sync()
}

// Close writes and fsyncs what is queued and stops the goroutine; later
// records are dropped. It is idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.quit)
	<-l.done
	err := l.Flush()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.pg != nil {
		l.pg.close()
		return err
	}
	l.head.close()
	return errors.Join(err, l.file.Close())
}
