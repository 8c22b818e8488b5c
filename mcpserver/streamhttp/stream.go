package streamhttp

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver/internal/edge"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/mcp"
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

// silence moves a live stream to streamSilenced (httpRequest.Drop).
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

// httpRequest is one MCP request's state along the chain, in one
// allocation: the core's caller, which the links fill in (callerState,
// auth, profile routing) before mcp-go serves the request, a POST's
// pollable writer and an initialize's session slot. It is the request's
// edge.Outbound.
type httpRequest struct {
	caller *providers.Connection // the core's (edge.Core.Begin)
	h      *Handler
	pw     pollableWriter
	claim  *sessionClaim // HTTP initialize (2025): its session slot
}

// Progress goes through mcp-go, onto the request's stream.
func (st *httpRequest) Progress(ctx context.Context, params map[string]any) bool {
	return st.h.via.Progress(ctx, params)
}

// Log goes through mcp-go, onto the request's stream.
func (st *httpRequest) Log(ctx context.Context, n mcp.LoggingMessageNotification) bool {
	return st.h.via.Log(ctx, n)
}

// WaitWritten holds the request's result until its stream carried n
// notifications, at most notificationWait (mcpgofix/dropnotify.go).
func (st *httpRequest) WaitWritten(ctx context.Context, n int) {
	if st.pw.w != nil { // a POST
		st.pw.notes.Wait(ctx, n, notificationWait)
	}
}

// BeforeRequest hands a 2025 session's parked GET stream to mcp-go: its
// requests to the client travel there (mcpgofix/getstream.go).
func (st *httpRequest) BeforeRequest(ctx context.Context) error {
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil || sess.SessionID() == "" {
		return nil
	}
	select {
	case <-st.h.parking.HandOver(sess.SessionID()):
		return nil
	case <-time.After(getStreamWait):
		// mcp-go would wait for a stream that never comes.
		return errors.New("mcpserver: sampling on a 2025 HTTP session travels on the client's GET stream, and the client has none open")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AnsweredInitialize needs nothing: mcp-go's HTTP sessions keep their
// own state.
func (*httpRequest) AnsweredInitialize() {}

// Drop silences the request's response.
func (st *httpRequest) Drop() { st.pw.silence() }

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
func (h *Handler) servePollable(w http.ResponseWriter, r *http.Request, st *httpRequest, detachable bool) {
	pw := &st.pw
	pw.init(w, detachable)
	if !detachable { // CloseStream never detaches it: serve in place
		h.streamable.ServeHTTP(pw, r)
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
	go func() {
		defer close(done)
		defer cancel()
		h.streamable.ServeHTTP(pw, r.WithContext(inner)) // inner keeps r's values
	}()
	select {
	case <-done:
	case <-pw.gone:
	}
}

// CloseStream ends the SSE stream of the request while the call
// continues (SEP-1699 polling; mcpserver.CloseStream): it sends one log
// notification so the client holds an event id, waits for it to be
// written, then ends the response. The result is recorded and replayed
// when the client reconnects with GET and Last-Event-ID. It reports false,
// doing nothing, where that is impossible: the sessionless 2026-07-28
// protocol, or a tool not marked registry.Tool.ClosesStream.
func (st *httpRequest) CloseStream(ctx context.Context) bool {
	srv := server.ServerFromContext(ctx)
	if !st.pw.detachable || srv == nil {
		return false
	}
	pw := &st.pw
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

var _ edge.Outbound = (*httpRequest)(nil)
