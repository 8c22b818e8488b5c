package mcpserver

import (
	"errors"
	"fmt"
	"github.com/bubbuild/bub-mcp/internal/reclaim"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Limits bound what clients may send. Every field's zero value means the
// default named next to it; bub.toml's [server] table sets them.
type Limits struct {
	// MaxMessageBytes bounds one message: an HTTP request body or a stdio
	// line. Over it HTTP answers 413 and stdio a JSON-RPC error; nothing
	// past the limit is kept in memory. Default DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxConcurrentRequests bounds the HTTP requests served at once, over
	// all clients; beyond it requests get 503 with Retry-After. Default
	// DefaultMaxConcurrentRequests.
	MaxConcurrentRequests int
	// MaxConcurrentPerClient bounds the requests one client has in flight:
	// a stdio connection, or over HTTP one session (2025) or TCP
	// connection (sessionless). Beyond it HTTP answers 503; on stdio as
	// many again wait their turn, and beyond those a JSON-RPC error
	// answers. Default DefaultMaxConcurrentPerClient.
	MaxConcurrentPerClient int
	// ReadTimeout bounds reading one HTTP request body, so a stalled body
	// is closed. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxSessions bounds the 2025-protocol HTTP sessions open at once;
	// beyond it initialize gets 503 with Retry-After. DELETE and
	// HTTPOptions.SessionIdleTTL end sessions and free their slots.
	// Default DefaultMaxSessions.
	MaxSessions int
	// MaxSessionsPerPrincipal bounds one principal's share of
	// MaxSessions, so one client cannot take them all: a principal is a
	// bearer token's name, or without tokens the client's IP address.
	// Default a quarter of MaxSessions (at least 1).
	MaxSessionsPerPrincipal int
}

// Defaults of Limits.
const (
	DefaultMaxMessageBytes        = 16 << 20
	DefaultMaxConcurrentRequests  = 256
	DefaultMaxConcurrentPerClient = 32
	DefaultReadTimeout            = 30 * time.Second
	DefaultIdleTimeout            = 2 * time.Minute
	// DefaultMaxSessions is far more than one user's clients open (one
	// per IDE window or agent) and enough for a team sharing a server,
	// while all of them together hold ~10 MiB (10.3 KB of heap each after
	// initialize, BenchmarkSessionMemory) rather than whatever clients
	// ask for.
	DefaultMaxSessions = 1024
)

func (l Limits) withDefaults() Limits {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if l.MaxConcurrentRequests <= 0 {
		l.MaxConcurrentRequests = DefaultMaxConcurrentRequests
	}
	if l.MaxConcurrentPerClient <= 0 {
		l.MaxConcurrentPerClient = DefaultMaxConcurrentPerClient
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxSessions <= 0 {
		l.MaxSessions = DefaultMaxSessions
	}
	if l.MaxSessionsPerPrincipal <= 0 {
		l.MaxSessionsPerPrincipal = max(l.MaxSessions/4, 1)
	}
	return l
}

// tooLargeMessage is the text both transports give for an oversized
// message; it names the setting to change.
func tooLargeMessage(limit int64) string {
	return fmt.Sprintf("message larger than %d bytes ([server] max_message_bytes)", limit)
}

// busyMessage is the text of a request refused for concurrency.
const busyMessage = "server busy: too many requests in flight ([server] max_concurrent_requests / max_concurrent_per_client); retry later"

// bounded is HTTP middleware for Limits: it refuses what is too large or
// beyond the concurrency bounds before mcp-go reads anything, and hands
// mcp-go a body it has already read within the limit.
func bounded(next http.Handler, l Limits, reclaim *reclaim.Reclaimer) http.Handler {
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
		http.Error(w, busyMessage, http.StatusServiceUnavailable)
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
	http.Error(w, tooLargeMessage(limit), http.StatusRequestEntityTooLarge)
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
