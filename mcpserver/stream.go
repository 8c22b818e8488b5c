package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
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
	mu      sync.Mutex
	w       http.ResponseWriter
	header  http.Header // used once detached
	state   streamState
	sent    bool          // a status or bytes went to the client
	flushed chan struct{} // non-nil while CloseStream waits for a flush
	gone    chan struct{} // closed on detach; made only when detachable

	detachable bool // a 2025 session's call of a ClosesStream tool

	notes mcpgofix.NotificationCount // notifications written (mcpgofix/dropnotify.go)
}

// streamState is where a POST's response stands. Transitions: live →
// silenced (silence: the request was cancelled), live or silenced →
// detached (detach: CloseStream). Detached is final.
type streamState uint8

const (
	// streamLive: mcp-go's writes go to the client.
	streamLive streamState = iota
	// streamSilenced: the client cancelled the request ("SHOULD NOT send
	// a response"); mcp-go's writes are dropped, and a response that sent
	// nothing yet ends as 204 No Content (finish).
	streamSilenced
	// streamDetached: the stream was closed for polling; writes fail with
	// errDetached, so mcp-go only records events for replay.
	streamDetached
)

// silence moves a live stream to streamSilenced (request.drop).
func (p *pollableWriter) silence() {
	p.mu.Lock()
	if p.state == streamLive {
		p.state = streamSilenced
	}
	p.mu.Unlock()
}

// detach moves the stream to streamDetached (CloseStream).
func (p *pollableWriter) detach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != streamDetached {
		p.state = streamDetached
		p.notes.Release()
		if p.gone != nil {
			close(p.gone)
		}
	}
}

func (p *pollableWriter) isDetached() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == streamDetached
}

// finish ends the writer's part in a request once its handler returned:
// a silenced response that sent nothing is answered 204 No Content.
func (p *pollableWriter) finish() {
	p.mu.Lock()
	state, sent := p.state, p.sent
	p.mu.Unlock()
	if state == streamSilenced && !sent {
		p.w.Header().Del("Content-Type") // mcp-go's, for the answer it did not send
		p.w.WriteHeader(http.StatusNoContent)
	}
}

// waitNotifications holds ctx's HTTP result until its stream carried n
// notifications, at most notificationWait (mcpgofix/dropnotify.go).
func waitNotifications(ctx context.Context, n int) {
	if r := requestFrom(ctx); r != nil && r.pw != nil {
		r.pw.notes.Wait(ctx, n, notificationWait)
	}
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
	if p.state == streamDetached {
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
	switch p.state {
	case streamDetached:
		return 0, errDetached
	case streamSilenced:
		return len(b), nil
	}
	p.sent = true
	n, err := p.w.Write(b)
	p.notes.Observe(b[:n])
	return n, err
}

func (p *pollableWriter) WriteHeader(code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == streamLive {
		p.sent = true
		p.w.WriteHeader(code)
	}
}

func (p *pollableWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != streamLive {
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
	if p.state == streamDetached {
		return nil
	}
	return p.w
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
	pw := &st.pw
	pw.init(w, detachable)
	st.request.pw = pw
	if !detachable { // CloseStream never detaches it: serve in place
		h.ServeHTTP(pw, r) // callerState attached st
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
		h.ServeHTTP(pw, r.WithContext(withHTTPRequest(inner, st)))
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
