package edge

import (
	"fmt"
	"time"
)

// Limits bound what clients may send. Every field's zero value means the
// default named next to it; bub.toml's [server] table sets them.
type Limits struct {
	// MaxMessageBytes bounds one message: an HTTP request body or a stdio
	// line. Over it HTTP answers 413 and stdio a JSON-RPC error; nothing
	// past the limit is kept in memory. Default DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxConcurrentRequests bounds the HTTP requests served at once, over
	// all clients; beyond it requests get 503 with Retry-After. Default
	// DefaultMaxConcurrentRequests.
	MaxConcurrentRequests int
	// MaxConcurrentPerClient bounds the requests one client has in flight:
	// a stdio connection, or over HTTP one session (2025) or TCP
	// connection (sessionless). Beyond it HTTP answers 503; on stdio as
	// many again wait their turn, and beyond those a JSON-RPC error
	// answers. Default DefaultMaxConcurrentPerClient.
	MaxConcurrentPerClient int
	// ReadTimeout bounds reading one HTTP request body, so a stalled body
	// is closed. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxSessions bounds the 2025-protocol HTTP sessions open at once;
	// beyond it initialize gets 503 with Retry-After. DELETE and
	// streamhttp.Options.SessionIdleTTL end sessions and free their slots.
	// Default DefaultMaxSessions.
	MaxSessions int
	// MaxSessionsPerPrincipal bounds one principal's share of
	// MaxSessions, so one client cannot take them all: a principal is a
	// bearer token's name, or without tokens the client's IP address.
	// Default a quarter of MaxSessions (at least 1).
	MaxSessionsPerPrincipal int
}

// Defaults of Limits.
const (
	DefaultMaxMessageBytes        = 16 << 20
	DefaultMaxConcurrentRequests  = 256
	DefaultMaxConcurrentPerClient = 32
	DefaultReadTimeout            = 30 * time.Second
	DefaultIdleTimeout            = 2 * time.Minute
	// DefaultMaxSessions is far more than one user's clients open (one
	// per IDE window or agent) and enough for a team sharing a server,
	// while all of them together hold ~10 MiB (10.3 KB of heap each after
	// initialize, BenchmarkSessionMemory) rather than whatever clients
	// ask for.
	DefaultMaxSessions = 1024
)

// WithDefaults fills in the zero fields.
func (l Limits) WithDefaults() Limits {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if l.MaxConcurrentRequests <= 0 {
		l.MaxConcurrentRequests = DefaultMaxConcurrentRequests
	}
	if l.MaxConcurrentPerClient <= 0 {
		l.MaxConcurrentPerClient = DefaultMaxConcurrentPerClient
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxSessions <= 0 {
		l.MaxSessions = DefaultMaxSessions
	}
	if l.MaxSessionsPerPrincipal <= 0 {
		l.MaxSessionsPerPrincipal = max(l.MaxSessions/4, 1)
	}
	return l
}

// TooLargeMessage is the text both transports give for an oversized
// message; it names the setting to change.
func TooLargeMessage(limit int64) string {
	return fmt.Sprintf("message larger than %d bytes ([server] max_message_bytes)", limit)
}

// BusyMessage is the text of a request refused for concurrency.
const BusyMessage = "server busy: too many requests in flight ([server] max_concurrent_requests / max_concurrent_per_client); retry later"
