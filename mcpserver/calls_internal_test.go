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
