package edge

import (
	"context"
	"testing"
	"time"
)

// TestCallsWait: wait returns at once with nothing in flight, returns
// when the last call ends (also one that started while it waited), and
// gives up when its context ends; a later wait works again.
func TestCallsWait(t *testing.T) {
	var c Calls
	if !c.Wait(t.Context()) {
		t.Fatal("wait with nothing in flight = false")
	}
	c.Add()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if c.Wait(ctx) {
		t.Fatal("wait with a call in flight and an ended context = true")
	}
	done := make(chan bool)
	go func() { done <- c.Wait(t.Context()) }()
	time.Sleep(10 * time.Millisecond)
	c.Add() // starts while the shutdown waits
	c.Done()
	select {
	case <-done:
		t.Fatal("wait returned with a call still in flight")
	case <-time.After(10 * time.Millisecond):
	}
	c.Done()
	if !<-done {
		t.Fatal("wait after the last call = false")
	}
	c.Add()
	c.Done()
	if !c.Wait(t.Context()) {
		t.Fatal("second wait = false")
	}
}
