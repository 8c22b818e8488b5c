package sessions

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
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bubbuild/bub-mcp/internal/sharedfile"
)

// fileBackend keeps each tape as Bub's JSONL file under home/tapes, safe
// for several processes: every append takes an exclusive flock, picks up
// what other processes appended since, and only then writes.
type fileBackend struct {
	dir string
	log *slog.Logger
}

func openFileBackend(o BackendOptions) (Backend, error) {
	dir := filepath.Join(o.Home, "tapes")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sessions: create tapes directory: %w", err)
	}
	return &fileBackend{dir: dir, log: o.Logger}, nil
}

func (b *fileBackend) Tape(name string) TapeBackend {
	path := filepath.Join(b.dir, name+".jsonl")
	return &fileTape{name: name, path: path, file: sharedfile.New(path), log: b.log}
}

func (b *fileBackend) Close() error { return nil }

// snapshotEvery is how many bytes a tape may grow past its snapshot before
// a new one is written: a restart then scans at most this much.
const snapshotEvery = 1 << 20

// fileRefreshInterval is how stale a process's view of a file tape's
// settings may be: another process's switch shows within it.
const fileRefreshInterval = 250 * time.Millisecond

// fileTape is one tape file. Its Tape's mutex guards every field.
type fileTape struct {
	name string
	path string
	file *sharedfile.File
	log  *slog.Logger

	ident  os.FileInfo // the file the summary describes; nil before there is one
	statAt time.Time   // when a settings read last looked at the file
	snapAt int64       // Size when the snapshot was last written or read
}

// Path is the tape's file.
func (t *fileTape) Path() string { return t.path }

func (t *fileTape) Load(sum *Summary) error {
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
	torn, err := t.catchUp(sum, f, fi)
	if err != nil {
		return err
	}
	if torn {
		t.warnTorn(sum, f)
	}
	if sum.st.Size != t.snapAt {
		t.writeSnapshot(sum)
	}
	return nil
}

// Refresh costs one stat(2) when nothing is new, and with fresh false
// nothing at all within fileRefreshInterval of the last look.
func (t *fileTape) Refresh(sum *Summary, fresh bool) error {
	if !fresh && time.Since(t.statAt) < fileRefreshInterval {
		return nil
	}
	t.statAt = time.Now()
	pst, err := os.Stat(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		if t.ident != nil { // removed by another process (a reset without archive)
			t.ident, *sum, t.snapAt = nil, Summary{}, 0
			t.file.Drop()
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sessions: stat tape %s: %w", t.name, err)
	}
	if t.ident != nil && os.SameFile(pst, t.ident) && pst.Size() == sum.st.Size {
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
	_, err = t.catchUp(sum, f, fi)
	t.maybeSnapshot(sum)
	return err
}

// Append writes the lines with a single write(2) under the file lock.
func (t *fileTape) Append(sum *Summary, build func(*Summary) []Line, sync bool) error {
	f, fi, created, err := t.file.Lock()
	if err != nil {
		return fmt.Errorf("sessions: open tape %s: %w", t.name, err)
	}
	defer t.file.Unlock()
	if created {
		sharedfile.SyncDir(filepath.Dir(t.path))
	}
	torn, err := t.catchUp(sum, f, fi)
	if err == nil && torn {
		// The file ends in a line nobody is writing (we hold the lock): a
		// crash's torn line, or one written without its newline. End it,
		// so it is read (or skipped) as a line of its own before ids are
		// given out after it.
		if _, err = f.Write([]byte{'\n'}); err == nil {
			if fi, err = f.Stat(); err == nil {
				_, err = t.catchUp(sum, f, fi)
			}
		}
	}
	if err != nil {
		return err
	}
	lines := build(sum)
	if len(lines) == 0 {
		return nil
	}
	if err := writeLines(f, lines); err != nil {
		// Whatever part reached the file is a torn line the next writer
		// starts after; the next refresh reads what did arrive.
		return fmt.Errorf("sessions: write tape %s: %w", t.name, err)
	}
	// We hold the lock and the file ended at Size: our lines follow.
	foldBytes(sum, lines)
	if sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sessions: fsync tape %s: %w", t.name, err)
		}
	}
	t.maybeSnapshot(sum)
	return nil
}

// foldBytes folds lines just stored at the end of a byte-positioned tape.
func foldBytes(sum *Summary, lines []Line) {
	off := sum.st.Size
	for _, l := range lines {
		end := off + int64(len(l.Text))
		sum.Add(l, off, end)
		off = end
		sum.st.Size = off
	}
}

// Open opens the file and checks it is the one sum describes, so a
// concurrent reset by another process cannot mix two files.
func (t *fileTape) Open(sum *Summary) (Source, error) {
	for range 10 {
		f, err := os.Open(t.path)
		if errors.Is(err, fs.ErrNotExist) && t.ident == nil {
			return &byteSource{r: bytes.NewReader(nil)}, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sessions: open tape %s: %w", t.name, err)
		}
		if err == nil {
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("sessions: stat tape %s: %w", t.name, err)
			}
			if t.ident != nil && os.SameFile(fi, t.ident) {
				return &byteSource{r: f, size: sum.st.Size, f: f}, nil
			}
			f.Close()
		}
		if err := t.Refresh(sum, true); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("sessions: tape %s keeps being replaced", t.name)
}

// Reset runs under the file lock, so another process's append lands
// wholly before or after it.
func (t *fileTape) Reset(sum *Summary, stamp string, mustArchive bool) (string, error) {
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
	t.ident, *sum, t.snapAt = nil, Summary{}, 0
	return archived, nil
}

func (t *fileTape) Sync() error {
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

// Close snapshots the summary and closes the file.
func (t *fileTape) Close(sum *Summary) error {
	if t.ident != nil && sum.st.Size != t.snapAt {
		t.writeSnapshot(sum)
	}
	if err := t.file.Close(); err != nil {
		return fmt.Errorf("sessions: close tape %s: %w", t.name, err)
	}
	return nil
}

// catchUp brings sum up to date with the file f (which the path names
// now): a different file than sum describes (a reset by another process,
// or the first look) is summarised afresh, from its snapshot when that is
// still valid; a grown one has its new complete lines folded in. It
// reports whether the file ends in a torn line.
func (t *fileTape) catchUp(sum *Summary, f *os.File, fi os.FileInfo) (torn bool, err error) {
	if t.ident == nil || !os.SameFile(fi, t.ident) || fi.Size() < sum.st.Size {
		*sum = Summary{}
		t.ident = fi
		t.snapAt = 0
		if snap, ok := t.readSnapshot(f, fi.Size()); ok {
			sum.st = snap
			t.snapAt = snap.Size
		}
	}
	if fi.Size() == sum.st.Size {
		return false, nil
	}
	end, err := t.foldFile(sum, f, sum.st.Size, fi.Size())
	if err != nil {
		return false, err
	}
	return end < fi.Size(), nil
}

// foldFile folds the complete lines of f in [from, to) into sum and
// returns where the last complete line ends.
func (t *fileTape) foldFile(sum *Summary, f *os.File, from, to int64) (int64, error) {
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
			t.foldLine(sum, line[:len(line)-1], off)
			off += int64(len(line))
			sum.st.Size = off
		}
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return off, fmt.Errorf("sessions: read tape %s: %w", t.name, err)
		}
	}
}

// foldLine adds one line (without its newline) at off to the summary.
// Lines that do not parse are skipped with a warning — a torn line after
// a crash is expected, never an error.
func (t *fileTape) foldLine(sum *Summary, line []byte, off int64) {
	h, err := peekLine(line)
	if errors.Is(err, errBlankLine) {
		return
	}
	if err != nil {
		t.log.Warn("sessions: skipping invalid tape line", "tape", t.name, "offset", off, "error", err)
		return
	}
	sum.st.add(h, off, int64(len(line))+1)
}

// maybeSnapshot writes the snapshot when the tape grew enough since the
// last one.
func (t *fileTape) maybeSnapshot(sum *Summary) {
	if sum.st.Size-t.snapAt >= snapshotEvery {
		t.writeSnapshot(sum)
	}
}

// warnTorn says, once at open, that the tape ends in a line that does not
// parse (a crash tore it); the next append ends it and it is skipped. A
// good line that only lacks its newline is kept, silently.
func (t *fileTape) warnTorn(sum *Summary, f *os.File) {
	fi, err := f.Stat()
	if err != nil || fi.Size()-sum.st.Size > 64<<20 {
		return
	}
	frag := make([]byte, fi.Size()-sum.st.Size)
	if _, err := f.ReadAt(frag, sum.st.Size); err != nil {
		return
	}
	if _, err := peekLine(frag); err != nil {
		t.log.Warn("sessions: skipping torn last tape line", "tape", t.path, "offset", sum.st.Size, "error", err)
	}
}

// byteSource reads a file or memory tape: the bytes [0, size) of r, whose
// positions are byte offsets.
type byteSource struct {
	r    io.ReaderAt
	size int64
	f    *os.File // closed with the source; nil for memory
}

func (s *byteSource) Forward(from int64, fn func(pos, end int64, line []byte) bool) error {
	return scanForward(s.r, from, s.size, func(off int64, line []byte) bool {
		return fn(off, off+int64(len(line))+1, line)
	})
}

func (s *byteSource) Backward(fn func(pos, end int64, line []byte) bool) error {
	return scanBackward(s.r, 0, s.size, func(off int64, line []byte) bool {
		return fn(off, off+int64(len(line))+1, line)
	})
}

func (s *byteSource) Close() error {
	if s.f != nil {
		return s.f.Close()
	}
	return nil
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

// memTape keeps a tape in this process only: a temp/ session's, or any
// tape of the memory store.
type memTape struct {
	mem []byte
	// kept is the summary at Close, as JSON (a copy: the closed Tape's
	// maps are not shared with the next), for the next Load of the same
	// tape in the memory store.
	kept []byte
}

func (t *memTape) Load(sum *Summary) error {
	if t.kept == nil {
		return nil
	}
	if err := json.Unmarshal(t.kept, sum); err != nil {
		return fmt.Errorf("sessions: memory tape summary: %w", err)
	}
	return nil
}

func (t *memTape) Refresh(*Summary, bool) error { return nil }
func (t *memTape) Sync() error                  { return nil }

func (t *memTape) Close(sum *Summary) error {
	b, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("sessions: memory tape summary: %w", err)
	}
	t.kept = b
	return nil
}

func (t *memTape) Append(sum *Summary, build func(*Summary) []Line, _ bool) error {
	lines := build(sum)
	for _, l := range lines {
		t.mem = append(t.mem, l.Text...)
	}
	foldBytes(sum, lines)
	return nil
}

// Open reads the bytes written so far; later appends never change them
// (they only add, or make a new slice), so the view stays consistent.
func (t *memTape) Open(sum *Summary) (Source, error) {
	return &byteSource{r: bytes.NewReader(t.mem), size: sum.st.Size}, nil
}

func (t *memTape) Reset(sum *Summary, _ string, _ bool) (string, error) {
	t.mem, *sum = nil, Summary{}
	return "", nil
}

// Interface guards.
var (
	_ Backend     = (*fileBackend)(nil)
	_ TapeBackend = (*fileTape)(nil)
	_ TapeBackend = (*memTape)(nil)
	_ Source      = (*byteSource)(nil)
)

// writeLines writes lines at the file's end in one writev(2), so a crash
// tears at most the last line, as one write of their concatenation would,
// without copying them into one buffer first: a large result's spill
// chunks were copied over and over while that buffer grew (6x a 40 MB
// result, issue 26). A short write (past 2 GiB, or a full disk) goes on
// from where it stopped.
func writeLines(f *os.File, lines []Line) error {
	// Linux's IOV_MAX: a longer vector is refused (EINVAL); a batch of
	// more lines takes one writev per 1024 (not one write then, but every
	// line stays whole).
	const maxIOV = 1024
	iov := make([][]byte, 0, len(lines))
	for _, l := range lines {
		if len(l.Text) > 0 {
			iov = append(iov, l.Text)
		}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for len(iov) > 0 {
			n, err := unix.Writev(int(fd), iov[:min(len(iov), maxIOV)])
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				return false // not ready: the runtime waits and calls again
			}
			if err != nil {
				werr = err
				return true
			}
			if n == 0 {
				werr = io.ErrShortWrite
				return true
			}
			for n > 0 && len(iov) > 0 {
				if n < len(iov[0]) {
					iov[0] = iov[0][n:]
					n = 0
				} else {
					n -= len(iov[0])
					iov = iov[1:]
				}
			}
		}
		return true
	}); err != nil {
		return err
	}
	return werr
}
