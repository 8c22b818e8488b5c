package streamhttp

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/internal/reclaim"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/edge"
	"golang.org/x/sync/semaphore"
)

// bounds limits what a POST may bring (size, read time, concurrency, in
// total and per client) before anything else reads it: see bounded.
func bounds(l edge.Limits, reclaim *reclaim.Reclaimer) Middleware {
	return func(next http.Handler) http.Handler { return bounded(next, l, reclaim) }
}

// bounded is HTTP middleware for Limits: it refuses what is too large or
// beyond the concurrency bounds before mcp-go reads anything, and hands
// mcp-go a body it has already read within the limit.
func bounded(next http.Handler, l edge.Limits, reclaim *reclaim.Reclaimer) http.Handler {
	total := semaphore.NewWeighted(int64(l.MaxConcurrentRequests))
	var (
		mu      sync.Mutex
		clients = map[string]int{}
	)
	acquire := func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		if clients[key] >= l.MaxConcurrentPerClient {
			return false
		}
		clients[key]++
		return true
	}
	release := func(key string) {
		mu.Lock()
		defer mu.Unlock()
		if clients[key]--; clients[key] <= 0 {
			delete(clients, key)
		}
	}
	busy := func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, edge.BusyMessage, http.StatusServiceUnavailable)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > l.MaxMessageBytes {
			tooLarge(w, l.MaxMessageBytes)
			return
		}
		if !total.TryAcquire(1) {
			busy(w)
			return
		}
		defer total.Release(1)
		key := r.Header.Get("Mcp-Session-Id")
		if key == "" {
			key = r.RemoteAddr
		}
		if !acquire(key) {
			busy(w)
			return
		}
		defer release(key)
		// A per-request deadline, not http.Server.ReadTimeout: that one
		// would also end long-lived SSE streams.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(l.ReadTimeout))
		body, err := readAllBounded(r, l.MaxMessageBytes)
		if err != nil {
			// The deadline stays: net/http would otherwise wait for the rest
			// of a stalled body before answering.
			w.Header().Set("Connection", "close")
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		if int64(len(body)) > l.MaxMessageBytes {
			tooLarge(w, l.MaxMessageBytes)
			return
		}
		end := reclaim.Begin(len(body))
		defer end()
		r.Body = &readBody{b: body}
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// tooLarge answers 413 and closes the connection, so the rest of the body
// is never read.
func tooLarge(w http.ResponseWriter, limit int64) {
	w.Header().Set("Connection", "close")
	w.Header().Set("X-Max-Message-Bytes", strconv.FormatInt(limit, 10))
	http.Error(w, edge.TooLargeMessage(limit), http.StatusRequestEntityTooLarge)
}

// readBody is a request body bounded has read: the MCP handler looks at
// the bytes (admit) without reading them again. Once read to the end it
// lets them go: mcp-go keeps its own copy while it handles the request.
type readBody struct {
	b   []byte
	off int
}

func (r *readBody) Read(p []byte) (int, error) {
	if r.off >= len(r.b) {
		r.b = nil
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

func (*readBody) Close() error { return nil }

// bodyBytes returns r's body as bounded read it, or nil.
func bodyBytes(r *http.Request) []byte {
	if b, ok := r.Body.(*readBody); ok {
		return b.b
	}
	return nil
}

// readAllBounded reads at most limit+1 bytes of r's body. A declared length
// sizes the buffer once, so a large body is not copied while it grows.
func readAllBounded(r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= limit {
		buf := make([]byte, n+1) // +1: a body longer than declared shows
		got, err := io.ReadFull(r.Body, buf)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = nil
		}
		return buf[:got], err
	}
	return io.ReadAll(io.LimitReader(r.Body, limit+1))
}
