package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The hash chain. Every record carries "seq" (its number, 1 for the first
// record ever written to the directory, counted across rotations) and
// "prev" (the hex SHA-256 of the previous record's line, newline left
// out; "" for seq 1), so a record removed, altered or moved breaks a link
// Verify finds. The first record of a new file links to the last of the
// file rotated away.
//
// The chain's head (the last record's seq and hash, the size audit.jsonl
// had after it, and the first seq still kept after pruning) lives in
// HeadFileName, rewritten in place under the log's flock after every
// commit. Writers read it there, so several processes sharing the
// directory keep one chain and a restart continues it; Verify compares it
// with the end of the log, so a truncated tail shows. It is evidence, not
// protection: whoever can write the directory can rewrite the whole chain
// (see the README's "who can erase what").

// HeadFileName is the chain head beside the log.
const HeadFileName = "audit.head"

// head is the chain's state after the last record written.
type head struct {
	seq   int64  // the last record's seq; 0: none yet
	hash  string // its hash, 64 hex digits
	size  int64  // audit.jsonl's size right after that record was written
	first int64  // the oldest seq kept once pruning removed files; 0: none pruned
}

// headLen is the fixed length of the head file, so it is rewritten in
// place with one pwrite.
const headLen = len("bub-audit-head 1 seq=00000000000000000000 first=00000000000000000000 size=00000000000000000000 hash=") + 64 + 1

func (h head) encode() []byte {
	hash := h.hash
	if hash == "" {
		hash = strings.Repeat("-", 64)
	}
	return fmt.Appendf(nil, "bub-audit-head 1 seq=%020d first=%020d size=%020d hash=%s\n", h.seq, h.first, h.size, hash)
}

// errNoHead is readHead's answer when there is no head file.
var errNoHead = errors.New("no chain head")

// readHead reads dir's head file: errNoHead when it does not exist, an
// error naming the file when it cannot be read or is not a head.
func readHead(dir string) (head, error) {
	path := filepath.Join(dir, HeadFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return head{}, errNoHead
	}
	if err != nil {
		return head{}, err
	}
	return parseHead(path, b)
}

// parseHead parses the head file's content (from path, for errors).
func parseHead(path string, b []byte) (head, error) {
	var h head
	f := strings.Fields(string(b))
	bad := fmt.Errorf("%s: not a chain head (want %q)", path, "bub-audit-head 1 seq=N first=N size=N hash=HEX")
	if len(b) != headLen || len(f) != 6 || f[0] != "bub-audit-head" || f[1] != "1" {
		return head{}, bad
	}
	for _, kv := range f[2:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "seq", "first", "size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return head{}, bad
			}
			switch k {
			case "seq":
				h.seq = n
			case "first":
				h.first = n
			default:
				h.size = n
			}
		case "hash":
			if v != strings.Repeat("-", 64) {
				if _, err := hex.DecodeString(v); err != nil || len(v) != 64 {
					return head{}, bad
				}
				h.hash = v
			}
		default:
			return head{}, bad
		}
	}
	return h, nil
}

// headFile is the head file a Log keeps open between commits, so a
// commit costs a stat, a pread and a pwrite more, not two opens. Like
// sharedfile.File it checks the path still names the file it has open.
// Callers hold the log's flock.
type headFile struct {
	path string
	f    *os.File
	id   os.FileInfo
	bad  bool // the last read found no valid head in the file
}

// read reads the head; errNoHead when there is no file.
func (hf *headFile) read() (head, error) {
	st, err := os.Stat(hf.path)
	if errors.Is(err, fs.ErrNotExist) {
		hf.close()
		return head{}, errNoHead
	}
	if err != nil {
		return head{}, err
	}
	if hf.f == nil || !os.SameFile(st, hf.id) {
		hf.close()
		if err := hf.open(os.O_RDWR); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return head{}, errNoHead
			}
			return head{}, err
		}
	}
	buf := make([]byte, headLen+1) // one more: a longer file is no head
	n, err := hf.f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return head{}, err
	}
	h, err := parseHead(hf.path, buf[:n])
	hf.bad = err != nil
	return h, err
}

// write rewrites the head in place, creating the file (mode 0600) when
// there is none.
func (hf *headFile) write(h head, sync bool) error {
	if hf.f == nil {
		if err := hf.open(os.O_RDWR | os.O_CREATE); err != nil {
			return err
		}
	}
	if hf.bad {
		if err := hf.f.Truncate(int64(headLen)); err != nil {
			return err
		}
		hf.bad = false
	}
	if _, err := hf.f.WriteAt(h.encode(), 0); err != nil {
		return err
	}
	if sync {
		return hf.f.Sync()
	}
	return nil
}

func (hf *headFile) open(flag int) error {
	f, err := os.OpenFile(hf.path, flag, 0o600)
	if err != nil {
		return err
	}
	id, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	hf.f, hf.id = f, id
	return nil
}

func (hf *headFile) close() {
	if hf.f != nil {
		hf.f.Close()
		hf.f = nil
	}
}

// link is a line's chain fields, as Verify and the writer read them back.
type link struct {
	Seq  *int64  `json:"seq"`
	Prev *string `json:"prev"`
	Note string  `json:"chain_note"`
}

// lineHash is the hash a record's successor names as "prev": SHA-256 of
// the line as written, newline left out.
func lineHash(ln []byte) string {
	sum := sha256.Sum256(bytes.TrimSuffix(ln, []byte("\n")))
	return hex.EncodeToString(sum[:])
}

// chain appends the batch to buf as chained lines, continuing h, and
// returns buf and the new head (size not set). note, when set, goes on
// the first line as "chain_note" for Verify to report.
func chain(buf []byte, batch [][]byte, h head, note string) ([]byte, head) {
	for _, b := range batch {
		// b is one JSON object and a newline (encode never makes
		// anything else): splice the link in before the closing brace.
		if !bytes.HasSuffix(b, []byte("}\n")) {
			continue
		}
		start := len(buf)
		buf = append(buf, b[:len(b)-2]...)
		buf = append(buf, `,"seq":`...)
		buf = strconv.AppendInt(buf, h.seq+1, 10)
		buf = append(buf, `,"prev":"`...)
		buf = append(buf, h.hash...)
		buf = append(buf, '"')
		if note != "" {
			buf = append(buf, `,"chain_note":`...)
			buf = strconv.AppendQuote(buf, note)
			note = ""
		}
		buf = append(buf, '}')
		sum := sha256.Sum256(buf[start:])
		buf = append(buf, '\n')
		h.seq++
		h.hash = hex.EncodeToString(sum[:])
	}
	return buf, h
}

// maxTail bounds how far back lastLine reads for the last line of a file.
const maxTail = 64 << 20

// lastLine returns the last whole line of f (size bytes long), newline
// included; nil when f is empty.
func lastLine(f io.ReaderAt, size int64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	var tail []byte
	chunk := int64(8 << 10)
	for {
		n := min(chunk, size, maxTail)
		tail = make([]byte, n)
		if _, err := f.ReadAt(tail, size-n); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		// The last byte is the newline ending the last line; the one
		// before that line is the newline of the line before.
		if i := bytes.LastIndexByte(tail[:len(tail)-1], '\n'); i >= 0 {
			return tail[i+1:], nil
		}
		if n == size || n == maxTail {
			return tail, nil
		}
		chunk *= 4
	}
}

// headOf reads a line's link back: the head it leaves (size not set);
// ok is false for a line without a link (written before the chain).
func headOf(ln []byte) (head, bool) {
	var l link
	if json.Unmarshal(ln, &l) != nil || l.Seq == nil || l.Prev == nil {
		return head{}, false
	}
	return head{seq: *l.Seq, hash: lineHash(ln)}, true
}
