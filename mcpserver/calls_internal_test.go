package mcpserver

import (
	"context"
	"testing"
	"time"
)

// TestCallsWait: wait returns at once with nothing in flight, returns
// when the last call ends (also one that started while it waited), and
// gives up when its context ends; a later wait works again.
func TestCallsWait(t *testing.T) {
	var c calls
	if !c.wait(t.Context()) {
		t.Fatal("wait with nothing in flight = false")
	}
	c.add()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if c.wait(ctx) {
		t.Fatal("wait with a call in flight and an ended context = true")
	}
	done := make(chan bool)
	go func() { done <- c.wait(t.Context()) }()
	time.Sleep(10 * time.Millisecond)
	c.add() // starts while the shutdown waits
	c.done()
	select {
	case <-done:
		t.Fatal("wait returned with a call still in flight")
	case <-time.After(10 * time.Millisecond):
	}
	c.done()
	if !<-done {
		t.Fatal("wait after the last call = false")
	}
	c.add()
	c.done()
	if !c.wait(t.Context()) {
		t.Fatal("second wait = false")
	}
}

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
