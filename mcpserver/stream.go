package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// errDetached is what writes to a closed-for-polling stream return; mcp-go
// then records events only, for replay on resume.
var errDetached = errors.New("mcpserver: stream closed for polling")

// pollableWriter sits between net/http and mcp-go for POST requests so a
// tool can end its SSE stream early (SEP-1699 polling) while the call goes
// on: the HTTP response ends cleanly, later events are recorded in the
// event store, and the client resumes with GET + Last-Event-ID.
type pollableWriter struct {
	mu       sync.Mutex
	w        http.ResponseWriter
	header   http.Header // used after detach
	detached bool
	flushed  chan struct{} // non-nil while CloseStream waits for a flush
	gone     chan struct{} // closed on detach

	notes   int           // notification events written so far
	noteSig chan struct{} // made by a waiter, closed (and dropped) when notes grows

	detachable bool // a 2025 session's call of a ClosesStream tool
	heldBack   bool // checkID refused the request's id: mcp-go's answer is dropped
	silenced   bool // the request was cancelled: nothing more is written (request.drop)
	sent       bool // a status or bytes went to the client

	// An answer whose id may not be the one the client sent is held until
	// the handler returns (finish): mcp-go refuses some requests
	// before any hook sees their id, and echoes the id as it decoded it.
	sniffed bool // the first write was looked at
	holding bool
	held    []byte
}

// holdBack drops whatever mcp-go writes from now on (see checkID).
func (p *pollableWriter) holdBack() {
	p.mu.Lock()
	p.heldBack = true
	p.mu.Unlock()
}

// silence drops whatever mcp-go writes from now on: the request was
// cancelled. Unlike holdBack, nothing is answered instead; a response
// that sent nothing yet ends as 204 No Content (see finish).
func (p *pollableWriter) silence() {
	p.mu.Lock()
	p.silenced = true
	p.mu.Unlock()
}

// finish ends the writer's part in a request once its handler returned.
// It writes the answer the writer held (see inexactID) with the id the
// request carried, or null when that is no string or integer; body is the
// request's, decoded only then. It reports whether checkID refused the
// request, whose answer serveOddID then writes.
func (p *pollableWriter) finish(body []byte) (refused bool) {
	p.mu.Lock()
	b, holding, detached, refused := p.held, p.holding, p.detached, p.heldBack
	silenced, sent := p.silenced, p.sent
	p.held, p.holding = nil, false
	p.mu.Unlock()
	if silenced && !detached {
		if !sent {
			p.w.Header().Del("Content-Type") // mcp-go's, for the answer it did not send
			p.w.WriteHeader(http.StatusNoContent)
		}
		return false
	}
	if !holding || detached {
		return refused
	}
	id := json.RawMessage("null")
	if req, err := parseEnvelope(body); err == nil {
		if valid, _ := idKind(req.ID); valid {
			id = req.ID
		}
	}
	if fixed, err := withID(b, id); err == nil {
		b = append(fixed, '\n')
	}
	_, _ = p.w.Write(b)
	return refused
}

// answerPrefix is how mcp-go begins every JSON answer.
var answerPrefix = []byte(`{"jsonrpc":"2.0","id":`)

// inexactID reports whether b, the start of an answer, carries an id that
// may not be the one the client sent: anything but a string, null or an
// integer of at most 15 digits (mcp-go echoes ids through float64).
func inexactID(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, answerPrefix)
	if !ok || len(rest) == 0 || rest[0] == '"' || rest[0] == 'n' {
		return false
	}
	rest = bytes.TrimPrefix(rest, []byte("-"))
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	return n == 0 || n > 15 || n < len(rest) && rest[n] != ',' && rest[n] != '}'
}

// httpRequest is an HTTP request's state: its request and, for a POST,
// its pollable writer, in one allocation.
type httpRequest struct {
	request
	pw  pollableWriter
	srv *Server
}

// init readies a pollable writer in place. gone exists only where
// servePollable waits on it (detachable requests).
func (p *pollableWriter) init(w http.ResponseWriter, detachable bool) {
	p.w, p.detachable = w, detachable
	if detachable {
		p.gone = make(chan struct{})
	}
}

func (p *pollableWriter) Header() http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.detached {
		if p.header == nil {
			p.header = http.Header{}
		}
		return p.header
	}
	return p.w.Header()
}

func (p *pollableWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.detached {
		return 0, errDetached
	}
	if p.heldBack || p.silenced {
		return len(b), nil
	}
	if !p.sniffed {
		p.sniffed = true
		p.holding = inexactID(b)
	}
	if p.holding {
		p.held = append(p.held, b...)
		return len(b), nil
	}
	p.sent = true
	n, err := p.w.Write(b)
	if c := bytes.Count(b[:n], notificationMarker); c > 0 {
		p.notes += c
		if p.noteSig != nil {
			close(p.noteSig)
			p.noteSig = nil
		}
	}
	return n, err
}

// notificationMarker appears once in every notification mcp-go writes; in
// JSON string content its quotes would be escaped, so results cannot fake it.
var notificationMarker = []byte(`"method":"notifications/`)

// waitNotifications waits until n notification events were written to the
// stream, the stream was closed for polling, or the timeout passed.
func (p *pollableWriter) waitNotifications(n int, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		done := p.notes >= n || p.detached
		if !done && p.noteSig == nil {
			p.noteSig = make(chan struct{})
		}
		sig := p.noteSig
		p.mu.Unlock()
		if done {
			return
		}
		select {
		case <-sig:
		case <-deadline.C:
			return
		}
	}
}

func (p *pollableWriter) WriteHeader(code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.detached && !p.heldBack && !p.silenced {
		p.sent = true
		p.w.WriteHeader(code)
	}
}

func (p *pollableWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.detached || p.heldBack || p.silenced || p.holding {
		return
	}
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
	if p.flushed != nil {
		close(p.flushed)
		p.flushed = nil
	}
}

// Unwrap lets http.ResponseController reach the connection (write
// deadlines) while the response is live.
func (p *pollableWriter) Unwrap() http.ResponseWriter {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.detached {
		return nil
	}
	return p.w
}

func (p *pollableWriter) detach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.detached {
		p.detached = true
		if p.gone != nil {
			close(p.gone)
		}
	}
}

func (p *pollableWriter) isDetached() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.detached
}

// servePollable runs h with a writer CloseStream can detach. The request's
// context is cancelled on client disconnect as usual, but not when the
// stream was closed for polling: the call must go on.
//
// Only a detachable request runs on another goroutine while the request's
// own waits for it to end or detach: that hand-off costs ~5 µs of CPU and
// a stack to grow (BenchmarkEchoPaired, 2025 sessions), so only the calls
// of tools that asked pay it (registry.Tool.ClosesStream).
func servePollable(h http.Handler, w http.ResponseWriter, r *http.Request, st *httpRequest, detachable bool) {
	if r.Header.Get("Mcp-Method") != "subscriptions/listen" { // lives until the client leaves
		st.srv.posts.add()
		defer st.srv.posts.done()
	}
	pw := &st.pw
	pw.init(w, detachable)
	st.request.pw = pw
	if !detachable { // CloseStream never detaches it: serve in place
		h.ServeHTTP(pw, r.WithContext(withRequest(r.Context(), &st.request)))
		return
	}
	inner, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stop := context.AfterFunc(r.Context(), func() {
		if !pw.isDetached() {
			cancel()
		}
	})
	defer stop()
	done := make(chan struct{})
	st.srv.pool.Go(func() {
		defer close(done)
		defer cancel()
		h.ServeHTTP(pw, r.WithContext(withRequest(inner, &st.request)))
	})
	select {
	case <-done:
	case <-pw.gone:
	}
}

// CloseStream ends the SSE stream of the current HTTP request while the
// call continues (SEP-1699 polling): it sends one log notification so the
// client holds an event id, waits for it to be written, then ends the
// response. The result is recorded and replayed when the client reconnects
// with GET and Last-Event-ID. It reports false, doing nothing, where that
// is impossible: stdio, the sessionless 2026-07-28 protocol, or a tool not
// marked registry.Tool.ClosesStream.
func CloseStream(ctx context.Context) bool {
	r := requestFrom(ctx)
	srv := server.ServerFromContext(ctx)
	if r == nil || r.pw == nil || !r.pw.detachable || srv == nil {
		return false
	}
	pw := r.pw
	flushed := make(chan struct{})
	pw.mu.Lock()
	pw.flushed = flushed
	pw.mu.Unlock()
	err := srv.SendNotificationToClient(ctx, "notifications/message", map[string]any{
		"level": "info", "logger": "bub-mcp", "data": "closing this stream; resume with Last-Event-ID",
	})
	if err == nil {
		select {
		case <-flushed:
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
	}
	pw.detach()
	return true
}
