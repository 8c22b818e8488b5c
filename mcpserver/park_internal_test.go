package mcpserver

import (
	"context"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestParkingForgetsEndedSessions: a 2025 session's GET-stream hand-off
// (made when one of its tools sampled) goes when the session ends however
// it ends; sessions that idle out send no DELETE, and their state used to
// stay for the life of the process.
func TestParkingForgetsEndedSessions(t *testing.T) {
	s, err := New(&Options{Backend: nopBackend{}, Registry: registry.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if err := s.mcp.RegisterSession(ctx, &endingSession{id: id, notes: make(chan mcp.JSONRPCNotification, 1)}); err != nil {
			t.Fatal(err)
		}
		s.parking.HandOver(id)
	}
	s.mcp.UnregisterSession(ctx, "a") // what mcp-go's DELETE, idle sweep and CloseSessions all call
	if s.parking.Handed("a") || !s.parking.Handed("b") {
		t.Errorf("hand-offs after session a ended: a %v, b %v; want only b's", s.parking.Handed("a"), s.parking.Handed("b"))
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
