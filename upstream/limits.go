package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// This file bounds what an upstream sends: one message, and the stderr
// kept for error messages.

// errMessageTooLong ends a stream whose message passed its bound.
var errMessageTooLong = errors.New("message too long")

// lineLimit fails a stdio stream once one line passes max bytes: the
// transport would otherwise read it whole into memory.
type lineLimit struct {
	r    io.Reader
	max  int64
	n    int64 // bytes of the current line so far
	over func(n int64)
}

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		if last := bytes.LastIndexByte(p[:n], '\n'); last < 0 {
			l.n += int64(n)
		} else {
			// The line the first newline ends began in an earlier read.
			if first := bytes.IndexByte(p[:n], '\n'); l.n+int64(first) > l.max {
				l.n += int64(first)
			} else {
				l.n = int64(n - 1 - last)
			}
		}
		if l.n > l.max {
			l.over(l.n)
			return 0, errMessageTooLong
		}
	}
	return n, err
}

// boundedBodies caps the response bodies of an HTTP upstream's calls; the
// standalone GET stream, which lives as long as the session, is not
// capped.
type boundedBodies struct {
	next http.RoundTripper
	max  int64
	key  string
}

func (b *boundedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost {
		return resp, err
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: b.max, key: b.key, max: b.max}
	return resp, nil
}

type cappedBody struct {
	io.ReadCloser
	left, max int64
	key       string
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1] // one byte past the cap tells a body of exactly max from a longer one
	}
	n, err := c.ReadCloser.Read(p)
	if c.left -= int64(n); c.left < 0 {
		return 0, fmt.Errorf("response over %s (%d bytes)", c.key, c.max)
	}
	return n, err
}

// tailBuffer keeps the last max bytes of a stream and logs its lines.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) drain(r io.Reader, log *slog.Logger) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			t.mu.Lock()
			t.b = append(t.b, buf[:n]...)
			if len(t.b) > t.max {
				t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
			}
			t.mu.Unlock()
			for _, line := range strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n") {
				log.Debug("upstream.stderr", "line", line)
			}
		}
		if err != nil {
			return
		}
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// largeResult is the size of a result from which its memory is handed
// back to the OS promptly (memory.large).
const largeResult = 8 << 20

// releaseAfter is how long after the last large result returned its
// memory is given back: long enough for the caller to have sent it on.
const releaseAfter = 2 * time.Second

// memory gives the OS back what a large upstream result cost. A message
// is copied several times on its way in (mcp-go's stdio transport reads
// a line, copies it twice more to decode it, keeps the result as raw
// JSON; we keep its text): all of it is garbage once the result is sent,
// but an idle process runs no collection for minutes, and the heap keeps
// the pages. So a large result is decoded after a collection (mcp-go's
// copies are dead by then, and the next stages reuse their pages) and
// followed by debug.FreeOSMemory releaseAfter after the call returned
// (one, however many large results came meanwhile).
type memory struct {
	mu     sync.Mutex
	timer  *time.Timer
	closed bool
}

func (m *memory) releaseSoon() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if m.timer == nil {
		m.timer = time.AfterFunc(releaseAfter, debug.FreeOSMemory)
		return
	}
	m.timer.Reset(releaseAfter)
}

// close stops a pending release: the module is shutting down.
func (m *memory) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.timer != nil {
		m.timer.Stop()
	}
}
