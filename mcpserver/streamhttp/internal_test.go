package streamhttp

import (
	"context"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestParkingForgetsEndedSessions: a 2025 session's GET-stream hand-off
// (made when one of its tools sampled) goes when the session ends however
// it ends; sessions that idle out send no DELETE, and their state used to
// stay for the life of the process.
func TestParkingForgetsEndedSessions(t *testing.T) {
	s, err := mcpserver.New(&mcpserver.Options{Backend: nopBackend{}, Registry: registry.New()})
	if err != nil {
		t.Fatal(err)
	}
	h := New(s, Options{})
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if err := s.MCP().RegisterSession(ctx, &endingSession{id: id, notes: make(chan mcp.JSONRPCNotification, 1)}); err != nil {
			t.Fatal(err)
		}
		h.parking.HandOver(id)
	}
	s.MCP().UnregisterSession(ctx, "a") // what mcp-go's DELETE, idle sweep and CloseSessions all call
	if h.parking.Handed("a") || !h.parking.Handed("b") {
		t.Errorf("hand-offs after session a ended: a %v, b %v; want only b's", h.parking.Handed("a"), h.parking.Handed("b"))
	}
}

type nopBackend struct{}

func (nopBackend) Resolve(context.Context, *providers.Connection) error { return nil }

func (nopBackend) View(context.Context, *providers.Connection) (*providers.View, error) {
	return &providers.View{}, nil
}

func (nopBackend) Call(context.Context, *providers.Connection, app.Request) registry.Result {
	return registry.Result{}
}

// endingSession is the least mcp-go's session registry takes.
type endingSession struct {
	id    string
	notes chan mcp.JSONRPCNotification
}

func (s *endingSession) SessionID() string                                   { return s.id }
func (s *endingSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.notes }
func (s *endingSession) Initialize()                                         {}
func (s *endingSession) Initialized() bool                                   { return true }

// TestSessionIDsForgetEnded: an ended session's id is refused and no
// longer held, so a long-lived server does not keep every id it issued;
// its slot is free again.
func TestSessionIDsForgetEnded(t *testing.T) {
	m := newSessionTable(2, 2)
	issue := func() string {
		c, err := m.reserve("p")
		if err != nil {
			t.Fatal(err)
		}
		return c.Generate()
	}
	a, b := issue(), issue()
	if a == b {
		t.Fatalf("two sessions got the same id %q", a)
	}
	if _, err := m.Terminate(a); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Validate(a); err == nil {
		t.Error("an ended session's id is still valid")
	}
	if _, err := m.Validate(b); err != nil {
		t.Errorf("a live session's id refused: %v", err)
	}
	var held []string
	for id := range m.live {
		held = append(held, id)
	}
	if len(held) != 1 || held[0] != b || m.total != 1 || m.held["p"] != 1 {
		t.Errorf("ids held after one of two ended: %v (total %d, principal's %d); want [%s] and 1", held, m.total, m.held["p"], b)
	}
	// A reservation no session was made of is given back once.
	c, err := m.reserve("q")
	if err != nil {
		t.Fatal(err)
	}
	m.settle(c)
	m.settle(c)
	if m.total != 1 || len(m.held) != 1 {
		t.Errorf("after a settled reservation: total %d, held %v; want 1 and only p's", m.total, m.held)
	}
}
