package edge

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestCallsWait: Wait returns at once with nothing in flight, returns
// when the last call ends (also one that started while it waited), and
// gives up when its context ends; a later Wait works again. In a bubble,
// so "has not returned yet" is exact rather than a guess after a sleep.
func TestCallsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Calls
		if !c.Wait(t.Context()) {
			t.Fatal("Wait with nothing in flight = false")
		}
		c.Add()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if c.Wait(ctx) {
			t.Fatal("Wait with a call in flight and an ended context = true")
		}
		done := make(chan bool, 1)
		go func() { done <- c.Wait(t.Context()) }()
		synctest.Wait() // the waiter is blocked
		c.Add()         // starts while the shutdown waits
		c.Done()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Wait returned with a call still in flight")
		default:
		}
		c.Done()
		if !<-done {
			t.Fatal("Wait after the last call = false")
		}
		c.Add()
		c.Done()
		if !c.Wait(t.Context()) {
			t.Fatal("second Wait = false")
		}
	})
}
