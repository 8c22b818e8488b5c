package mcpgofix

// Defect: over streamable HTTP, mcp-go v1.2.1 can drop a notification a
// handler sent just before it returned: the forwarder takes the
// notification off the session queue, then finds the response already
// written and discards it. 18 of 30 runs lost a call's last progress
// event; subscriptions/listen loses its acknowledgement the same way when
// the result follows at once. An event store avoids the loss only for
// session-based (2025) requests.
// Upstream: mark3labs/mcp-go PR #969 (open as of 2026-12).
// Test: TestProgressNotificationsNeverLost, TestListenAcknowledgedFirst.
// Delete when: PR #969 or an equivalent fix is released; then the event
// store stays only for Last-Event-ID replay.
//
// The repair: the result of a call that sent n notifications is held
// until the response stream carried n of them (or a bound passed).
// NotificationCount learns how many were carried by counting them in the
// bytes mcp-go writes: mcp-go has no hook after a notification is written,
// so this is the one place bub-mcp reads mcp-go's output, and only for
// this count.

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// EventStore is the streamable-HTTP option that closes the race for
// 2025 sessions (and enables Last-Event-ID replay).
func EventStore() server.StreamableHTTPOption {
	return server.WithEventStore(server.NewInMemoryEventStore())
}

// notificationMarker appears once in every notification mcp-go writes; in
// JSON string content its quotes are escaped, so a result cannot fake it.
var notificationMarker = []byte(`"method":"notifications/`)

// NotificationCount counts the notifications written to one response.
// The zero value is ready.
type NotificationCount struct {
	mu       sync.Mutex
	n        int
	released bool
	sig      chan struct{} // made by a waiter, closed when n grows or on Release
}

// Observe counts the notifications in b, bytes just written to the
// response.
func (c *NotificationCount) Observe(b []byte) {
	k := bytes.Count(b, notificationMarker)
	if k == 0 {
		return
	}
	c.mu.Lock()
	c.n += k
	c.wake()
	c.mu.Unlock()
}

// Release ends every wait: the response will carry nothing more (its
// stream was closed for polling).
func (c *NotificationCount) Release() {
	c.mu.Lock()
	c.released = true
	c.wake()
	c.mu.Unlock()
}

func (c *NotificationCount) wake() {
	if c.sig != nil {
		close(c.sig)
		c.sig = nil
	}
}

// Wait returns once n notifications were written, the count was
// released, ctx ended or timeout passed.
func (c *NotificationCount) Wait(ctx context.Context, n int, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		done := c.n >= n || c.released
		if !done && c.sig == nil {
			c.sig = make(chan struct{})
		}
		sig := c.sig
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-sig:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// ListenAcknowledged is an AfterSubscriptionsListen hook that holds the
// result until wait says the acknowledgement was written.
func ListenAcknowledged(wait func(ctx context.Context)) func(context.Context, any, *mcp.SubscriptionsListenRequest, *mcp.SubscriptionsListenResult) {
	return func(ctx context.Context, _ any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
		if ctx.Err() == nil {
			wait(ctx)
		}
	}
}
