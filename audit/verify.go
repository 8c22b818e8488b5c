package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Problem kinds, as Verify reports them.
const (
	// ProblemAltered: a record is not what was written (its hash does not
	// match the next record's link, or it is not JSON, or it lost its link).
	ProblemAltered = "altered"
	// ProblemMissing: records are missing between two that are kept, or
	// before the oldest one kept.
	ProblemMissing = "missing"
	// ProblemReordered: a record is out of order or repeated.
	ProblemReordered = "reordered"
	// ProblemTruncated: the log ends before the last record the chain
	// head knows of.
	ProblemTruncated = "truncated"
	// ProblemHead: the chain head is missing or unreadable, or a writer
	// found the log changed under it (a "chain_note" in a record).
	ProblemHead = "head"
)

// Problem is the first break Verify found in the chain.
type Problem struct {
	// File is the log file (a name in the directory) and Line the line
	// (from 1) of the record at fault; Line is 0 for the head file.
	File string `json:"file"`
	Line int    `json:"line"`
	// Seq is the record's seq, when it has one.
	Seq int64 `json:"seq,omitempty"`
	// Kind is one of the Problem* constants.
	Kind string `json:"kind"`
	// Detail says what is wrong, for a person.
	Detail string `json:"detail"`
}

func (p *Problem) Error() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s: %s", p.File, p.Kind, p.Detail)
	}
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Kind, p.Detail)
}

// Report is what Verify found in a directory.
type Report struct {
	// Dir is the directory verified.
	Dir string `json:"dir"`
	// Files are the log files read, oldest first.
	Files []string `json:"files"`
	// Records counts the chained records read; Unchained those written
	// before records carried links (by an earlier bub-mcp), which nothing
	// can check.
	Records   int `json:"records"`
	Unchained int `json:"unchained,omitempty"`
	// First and Last are the seqs of the oldest and newest records read.
	First int64 `json:"first_seq,omitempty"`
	Last  int64 `json:"last_seq,omitempty"`
	// Problem is the first break found; nil when the chain is intact.
	Problem *Problem `json:"problem,omitempty"`
}

// Intact reports whether Verify found no problem.
func (r *Report) Intact() bool { return r.Problem == nil }

// record is one line as Verify reads it.
type record struct {
	file string
	line int
	seq  int64
	prev string
	hash string
	note string
}

// Verify checks the audit log in dir (every rotated file, oldest first,
// then audit.jsonl) against its hash chain and chain head, and reports the
// first record missing, altered or out of order, or a tail cut off since
// the head was written. It checks the log as it stood at one moment (see
// snapshot): the shared lock on audit.jsonl is held only while the head
// is read and the files opened, not for the whole reading, so writers
// sharing the directory wait for that, not for a scan of every file. The
// error is for a directory that cannot be read; a broken chain is
// Report.Problem.
func Verify(dir string) (*Report, error) {
	rep := &Report{Dir: dir}
	snap, err := snapshot(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: verify %s: %w", dir, err)
	}
	defer snap.close()
	if testHookVerifying != nil {
		testHookVerifying()
	}
	for _, f := range snap.files {
		rep.Files = append(rep.Files, f.name)
	}
	if snap.headErr != nil && !errors.Is(snap.headErr, errNoHead) {
		rep.Problem = &Problem{File: HeadFileName, Kind: ProblemHead, Detail: snap.headErr.Error()}
		return rep, nil
	}
	hasHead := snap.headErr == nil

	v := &verifier{rep: rep, head: snap.head, hasHead: hasHead}
	rd := &reader{files: snap.files, rep: rep}
	cur, err := rd.next()
	for cur != nil && rep.Problem == nil {
		next, err := rd.next()
		if err != nil {
			return nil, fmt.Errorf("audit: verify: %w", err)
		}
		if v.check(cur, next) {
			break
		}
		cur = next
	}
	if err != nil {
		return nil, fmt.Errorf("audit: verify: %w", err)
	}
	if rep.Problem == nil {
		v.finish()
	}
	return rep, nil
}

// testHookVerifying, when set by a test, runs after Verify took its
// snapshot and before it reads it.
var testHookVerifying func()

// logSnapshot is the log as it stood at one moment: the chain head, and
// every file open, audit.jsonl with the size it had then. What writers do
// after it is taken changes nothing it reads: rotated files are never
// written again, an open file can still be read after pruning removes it
// or rotation renames it, and audit.jsonl is read only to that size.
type logSnapshot struct {
	head    head
	headErr error
	files   []snapFile // oldest first
}

// snapFile is one file of a snapshot: its name in the directory, and the
// bytes it had when the snapshot was taken.
type snapFile struct {
	name string
	f    *os.File
	size int64
}

// snapshot takes the snapshot under a shared lock on audit.jsonl (writers
// append and rotate under an exclusive one) and releases the lock before
// returning: what the head says and what the files hold agree.
func snapshot(dir string) (_ *logSnapshot, err error) {
	live, err := lockShared(filepath.Join(dir, FileName))
	if err != nil {
		return nil, err
	}
	s := &logSnapshot{}
	defer func() {
		switch {
		case live == nil:
		case err != nil:
			live.Close() // which releases the lock
		default:
			unlockShared(live)
		}
	}()
	// s.files holds live only once nothing can fail.
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	var liveSize int64
	if live != nil {
		st, err := live.Stat()
		if err != nil {
			return nil, err
		}
		liveSize = st.Size()
	}
	rotated, err := Rotated(dir)
	if err != nil {
		return nil, err
	}
	slices.Reverse(rotated)
	for _, name := range rotated {
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned since it was listed (by a writer without the lock)
		}
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		s.files = append(s.files, snapFile{name: name, f: f, size: st.Size()})
	}
	if live != nil {
		s.files = append(s.files, snapFile{name: FileName, f: live, size: liveSize})
	}
	s.head, s.headErr = readHead(dir)
	return s, nil
}

// close closes the snapshot's files.
func (s *logSnapshot) close() {
	for _, f := range s.files {
		f.f.Close()
	}
	s.files = nil
}

// verifier follows the chain one record at a time, with the next record
// in view (to tell a swap from a gap).
type verifier struct {
	rep     *Report
	head    head
	hasHead bool
	last    *record // the last record checked
	headHit bool    // a record with the head's seq was seen
}

// check checks cur against the record before it and the one after it
// (nil at the end), and reports whether it found a problem.
func (v *verifier) check(cur, next *record) bool {
	rep := v.rep
	fail := func(r *record, kind, format string, args ...any) bool {
		rep.Problem = &Problem{File: r.file, Line: r.line, Seq: r.seq, Kind: kind, Detail: fmt.Sprintf(format, args...)}
		return true
	}
	if rep.Problem != nil {
		return true
	}
	if cur.note != "" {
		return fail(cur, ProblemHead, "a writer found the log changed before this record: %s", cur.note)
	}
	if v.last == nil {
		want := int64(1)
		if v.head.first > 0 {
			want = v.head.first
		}
		switch {
		case cur.seq > want:
			return fail(cur, ProblemMissing, "the oldest record kept is seq %d, want %d: %s missing (files removed outside rotation)", cur.seq, want, span(want, cur.seq-1))
		case cur.seq < want:
			return fail(cur, ProblemMissing, "the oldest record kept is seq %d, but the chain head says records before seq %d were pruned", cur.seq, want)
		case cur.seq == 1 && cur.prev != "":
			return fail(cur, ProblemAltered, "the first record links to a record before it")
		}
	} else {
		last := v.last
		switch {
		case cur.seq == last.seq+1 && cur.prev != last.hash:
			return fail(last, ProblemAltered, "its hash does not match the link in the next record (%s:%d): this record, or that link, was changed", cur.file, cur.line)
		case cur.seq <= last.seq:
			return fail(cur, ProblemReordered, "seq %d comes after seq %d (%s:%d): records out of order or repeated", cur.seq, last.seq, last.file, last.line)
		case cur.seq > last.seq+1 && next != nil && next.seq == last.seq+1:
			return fail(cur, ProblemReordered, "seq %d comes before seq %d (%s:%d): records out of order", cur.seq, next.seq, next.file, next.line)
		case cur.seq > last.seq+1 && cur.prev == last.hash:
			return fail(cur, ProblemAltered, "its seq is %d but it links to seq %d", cur.seq, last.seq)
		case cur.seq > last.seq+1:
			return fail(cur, ProblemMissing, "%s missing before it (after %s:%d)", span(last.seq+1, cur.seq-1), last.file, last.line)
		}
	}
	if v.hasHead && cur.seq == v.head.seq {
		v.headHit = true
		if cur.hash != v.head.hash {
			return fail(cur, ProblemAltered, "its hash does not match the chain head's (%s)", HeadFileName)
		}
	}
	if rep.First == 0 {
		rep.First = cur.seq
	}
	rep.Last = cur.seq
	rep.Records++
	v.last = cur
	return false
}

// span names the records a to b, with the verb's number.
func span(a, b int64) string {
	if a == b {
		return fmt.Sprintf("record %d is", a)
	}
	return fmt.Sprintf("records %d to %d are", a, b)
}

// finish checks the end of the log against the head.
func (v *verifier) finish() {
	rep := v.rep
	switch {
	case !v.hasHead && rep.Records > 0:
		rep.Problem = &Problem{File: HeadFileName, Kind: ProblemHead, Detail: "the chain head is missing: the end of the log cannot be checked"}
	case v.hasHead && v.head.seq > 0 && (v.last == nil || v.last.seq < v.head.seq):
		p := &Problem{File: HeadFileName, Kind: ProblemTruncated}
		if v.last == nil {
			p.Detail = fmt.Sprintf("the chain head says %d records were written, and none is left", v.head.seq)
		} else {
			p.File, p.Line, p.Seq = v.last.file, v.last.line, v.last.seq
			p.Detail = fmt.Sprintf("the log ends at seq %d, but the chain head says %d records were written: %s cut off", v.last.seq, v.head.seq, span(v.last.seq+1, v.head.seq))
		}
		rep.Problem = p
	case v.hasHead && v.head.seq > 0 && !v.headHit:
		rep.Problem = &Problem{File: HeadFileName, Kind: ProblemMissing, Detail: fmt.Sprintf("no record has the head's seq %d", v.head.seq)}
	}
}

// reader reads the chained records of files (in dir), oldest first,
// counting the unchained ones before the chain in rep. A line that is not
// a record sets rep.Problem and ends the reading.
type reader struct {
	files   []snapFile
	rep     *Report
	r       *bufio.Reader
	name    string
	n       int
	chained bool
}

// next returns the next chained record; nil at the end or once
// rep.Problem is set.
func (rd *reader) next() (*record, error) {
	for rd.rep.Problem == nil {
		if rd.r == nil {
			if len(rd.files) == 0 {
				return nil, nil
			}
			f := rd.files[0]
			rd.name, rd.files, rd.n = f.name, rd.files[1:], 0
			rd.r = bufio.NewReaderSize(io.NewSectionReader(f.f, 0, f.size), 64<<10)
		}
		ln, err := rd.r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w", rd.name, err)
		}
		if len(ln) == 0 {
			rd.r = nil
			continue
		}
		rd.n++
		fail := func(detail string) {
			rd.rep.Problem = &Problem{File: rd.name, Line: rd.n, Kind: ProblemAltered, Detail: detail}
		}
		var lk link
		switch {
		case ln[len(ln)-1] != '\n':
			fail("the last line is cut short (no newline)")
		case json.Unmarshal(ln, &lk) != nil:
			fail("not a JSON record")
		case lk.Seq == nil || lk.Prev == nil:
			if rd.chained {
				fail("a record without its link (seq, prev) after the chain began")
			} else {
				rd.rep.Unchained++
			}
		default:
			rd.chained = true
			return &record{file: rd.name, line: rd.n, seq: *lk.Seq, prev: *lk.Prev, hash: lineHash(ln), note: lk.Note}, nil
		}
	}
	return nil, nil
}

// lockShared takes a shared flock on the log file and returns the file
// locked, the one its path names once locked (a rotation between the
// open and the lock gets the new one); nil when there is no log file.
// No writer appends or rotates until unlockShared; the file stays open
// and readable after.
func lockShared(path string) (*os.File, error) {
	for range 100 {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if err := flock(f, syscall.LOCK_SH); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		fst, err1 := f.Stat()
		pst, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fst, pst) {
			return f, nil
		}
		f.Close() // rotated between open and lock: try the new one
	}
	return nil, errors.New("lock " + path + ": the file keeps being replaced")
}

// unlockShared releases lockShared's lock; the file stays open, to be
// read. A file that cannot be unlocked is closed, which releases the lock
// too (the snapshot then fails to read it).
func unlockShared(f *os.File) {
	if err := flock(f, syscall.LOCK_UN); err != nil {
		f.Close()
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
