package mcpgofix

// Defect: mcp-go v1.2.1 (with an event store) starts a session-wide
// notification pump on a 2025 session's first GET stream. That pump and
// every in-flight POST read the same notification queue, so a call's
// progress or log notifications may leave on the GET stream and reach the
// client after the call's result (clients then drop them), or be recorded
// while no GET is attached and never arrive. Yet sampling requests travel
// only through that pump, and mcp-go waits without bound for a GET stream
// the client never opens.
// Upstream: no upstream issue as of 2026-12; reported behaviour: with
// WithEventStore, a client holding a GET stream open receives a call's
// notifications/progress on the GET stream after the call's result on the
// POST stream.
// Test: TestProgressNotificationsNeverLost, TestSamplingTakesOverTheParkedStream,
// TestParkingForgetsEndedSessions.
// Delete when: mcp-go routes a request's notifications to that request's
// stream only, and bounds its wait for the GET stream.
//
// The repair: a GET stream is accepted and held open idle ("parked"): the
// client has its stream, mcp-go has no pump, and every notification rides
// the POST of the call that sent it. The first time a tool in the session
// asks for sampling, the parked connection is handed to mcp-go, which
// starts its pump; from then on that session behaves as mcp-go does.

import (
	"net/http"
	"sync"
)

// Parking holds the 2025 sessions' GET streams (see above).
type Parking struct {
	closing   chan struct{} // closed on shutdown: parked streams end
	closeOnce sync.Once
	mu        sync.Mutex
	byID      map[string]*parkedGET
	handed    map[string]*handOff // sessions whose GET stream mcp-go serves
}

type parkedGET struct {
	once   sync.Once
	unpark chan struct{}
}

// handOff records that a session's GET stream belongs to mcp-go; ready is
// closed once mcp-go serves it.
type handOff struct {
	once  sync.Once
	ready chan struct{}
}

// markReady closes ready; h may be nil (the session was forgotten).
func (h *handOff) markReady() {
	if h != nil {
		h.once.Do(func() { close(h.ready) })
	}
}

// NewParking returns an empty Parking.
func NewParking() *Parking {
	return &Parking{closing: make(chan struct{}), byID: map[string]*parkedGET{}, handed: map[string]*handOff{}}
}

// ServeGET serves a standalone GET stream: parked, or through mcp-go once
// the session needs it.
func (p *Parking) ServeGET(h http.Handler, w http.ResponseWriter, r *http.Request, sessionID string) {
	ho, parked, ok := p.park(w, r, sessionID)
	if !ok {
		return
	}
	if parked {
		w = sentHeaders{w}
	}
	// mcp-go attaches the connection to its listening stream before its
	// first flush, so that flush says the stream is ready for requests.
	h.ServeHTTP(&readyWriter{ResponseWriter: w, ho: ho}, r)
}

// park holds a GET stream open until the client leaves or the session
// needs the real stream. ok reports whether the caller must now serve the
// request through mcp-go, parked whether headers were already sent; ho is
// the session's hand-off.
func (p *Parking) park(w http.ResponseWriter, r *http.Request, sessionID string) (ho *handOff, parked, ok bool) {
	p.mu.Lock()
	if ho, handed := p.handed[sessionID]; handed {
		p.mu.Unlock()
		return ho, false, true
	}
	// A GET that supersedes an earlier one takes its place; the earlier
	// one just waits for its client to go.
	pg := &parkedGET{unpark: make(chan struct{})}
	p.byID[sessionID] = pg
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.byID[sessionID] == pg {
			delete(p.byID, sessionID)
		}
		p.mu.Unlock()
	}()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	select {
	case <-r.Context().Done():
		return nil, true, false
	case <-p.closing:
		return nil, true, false
	case <-pg.unpark:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.handed[sessionID], true, true
	}
}

// HandOver gives the session's parked GET (if any) to mcp-go and makes
// future GETs of the session go there directly. The returned channel is
// closed once mcp-go serves the session's GET stream; a request queued
// before that could be recorded but never sent (mcp-go's pump starts before
// it attaches the connection).
func (p *Parking) HandOver(sessionID string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ho, ok := p.handed[sessionID]
	if !ok {
		ho = &handOff{ready: make(chan struct{})}
		p.handed[sessionID] = ho
	}
	if pg := p.byID[sessionID]; pg != nil {
		pg.once.Do(func() { close(pg.unpark) })
	}
	return ho.ready
}

// Shutdown ends every parked stream, so a graceful shutdown is not held
// up by idle SSE connections.
func (p *Parking) Shutdown() { p.closeOnce.Do(func() { close(p.closing) }) }

// Handed reports whether sessionID's GET stream was handed to mcp-go.
func (p *Parking) Handed(sessionID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.handed[sessionID]
	return ok
}

// Forget drops a terminated session's state.
func (p *Parking) Forget(sessionID string) {
	p.mu.Lock()
	delete(p.handed, sessionID)
	p.mu.Unlock()
}

// readyWriter marks the hand-off ready on the first flush.
type readyWriter struct {
	http.ResponseWriter
	ho *handOff
}

func (rw *readyWriter) Flush() {
	if f, ok := rw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	rw.ho.markReady()
}

func (rw *readyWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// sentHeaders wraps a writer whose status line was already sent, so mcp-go
// can "start" the SSE response again harmlessly.
type sentHeaders struct{ http.ResponseWriter }

func (s sentHeaders) WriteHeader(int) {}

func (s sentHeaders) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s sentHeaders) Unwrap() http.ResponseWriter { return s.ResponseWriter }
