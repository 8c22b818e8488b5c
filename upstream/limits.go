package upstream

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// This file bounds what an upstream sends: one HTTP message (a stdio
// line is bounded by stdioclient), and the stderr kept for error
// messages.

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
// passes through more than one buffer on its way in (stdioclient gathers
// a line in chunks and joins them; mcp-go's HTTP transports copy a body
// several times; we keep the text): all of it is garbage once the result
// is sent, but an idle process runs no collection for minutes, and the
// heap keeps the pages. So a large result is decoded after a collection
// (the transport's dead buffers are freed, and the text reuses their
// pages) and
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
