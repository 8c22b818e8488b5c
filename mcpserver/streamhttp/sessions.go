package streamhttp

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// sessionRetryAfter is the Retry-After of an initialize refused for want
// of a session slot: slots free when clients end sessions (DELETE) or
// session_idle_ttl ends idle ones, neither of which comes within a second
// or two.
const sessionRetryAfter = 60

// sessionTable holds the 2025-protocol sessions: the ids issued and not
// yet ended, each with the principal that opened it, bounded in all
// (Limits.MaxSessions) and per principal (Limits.MaxSessionsPerPrincipal).
// A session costs memory for its life (mcp-go's session state, the event
// store's replay buffer), and nothing else would stop one client from
// opening them until the process runs out.
//
// An initialize takes a slot before mcp-go serves it (reserve), which
// mcp-go's Generate turns into the session (mcp-go resolves the manager
// per request, so Generate learns whose reservation it uses); a slot
// never turned into a session is given back (settle). DELETE, the idle
// sweep and shutdown end sessions (Terminate). An ended id is forgotten
// (mcp-go's InsecureStatefulSessionIdManager keeps every id for the
// process's life, 173 bytes of heap per session ever made) and answers
// 404 as an unknown one does.
type sessionTable struct {
	max, perPrincipal int

	mu    sync.RWMutex
	live  map[string]string // session id → principal
	held  map[string]int    // principal → sessions and reservations
	total int               // sessions and reservations
}

func newSessionTable(max, perPrincipal int) *sessionTable {
	return &sessionTable{max: max, perPrincipal: perPrincipal, live: map[string]string{}, held: map[string]int{}}
}

// sessionClaim is one initialize's reservation of a slot, and the
// SessionIdManager mcp-go uses while it serves that request.
type sessionClaim struct {
	t         *sessionTable
	principal string
	reserved  bool // the slot is not yet a session; t.mu guards it
}

// principalOf is whom a request's sessions count against: its bearer
// token's name, or without tokens the client's address (all clients
// behind one proxy share it).
func principalOf(r *http.Request, token string) string {
	if token != "" {
		return "token " + token
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "address " + host
}

// reserve takes a slot for principal's next session, or says which
// bound refuses it.
func (t *sessionTable) reserve(principal string) (*sessionClaim, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.total >= t.max {
		return nil, fmt.Errorf("too many sessions: the server holds its limit of %d ([server] max_sessions); end a session (DELETE) or retry later", t.max)
	}
	if t.held[principal] >= t.perPrincipal {
		return nil, fmt.Errorf("too many sessions for this client: it holds its limit of %d ([server] max_sessions_per_principal); end a session (DELETE) or retry later", t.perPrincipal)
	}
	t.held[principal]++
	t.total++
	return &sessionClaim{t: t, principal: principal, reserved: true}, nil
}

// settle gives back a reservation no session was made of (an initialize
// mcp-go refused).
func (t *sessionTable) settle(c *sessionClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.reserved {
		c.reserved = false
		t.forget(c.principal)
	}
}

// forget takes one session or reservation off principal; t.mu held.
func (t *sessionTable) forget(principal string) {
	t.total--
	if t.held[principal]--; t.held[principal] <= 0 {
		delete(t.held, principal)
	}
}

// issue makes a session of principal's; with no reservation left (a
// request mcp-go served twice) it counts one more beyond the bounds.
func (t *sessionTable) issue(c *sessionClaim) string {
	id := "mcp-session-" + rand.Text() // 130 random bits
	principal := ""
	if c != nil {
		principal = c.principal
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c != nil && c.reserved {
		c.reserved = false
	} else {
		t.held[principal]++
		t.total++
	}
	t.live[id] = principal
	return id
}

func (t *sessionTable) known(id string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.live[id]
	return ok
}

// ResolveSessionIdManager gives mcp-go the claim of the initialize being
// served, so that Generate uses its slot; every other request (and
// mcp-go's sweeper, with r nil) gets the table.
func (t *sessionTable) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r != nil {
		if st := httpRequestFrom(r.Context()); st != nil && st.claim != nil {
			return st.claim
		}
	}
	return t
}

// Generate issues a session outside any claim; mcp-go generates ids only
// for initialize, which has one, so this is a fallback.
func (t *sessionTable) Generate() string { return t.issue(nil) }

// Validate refuses an id not issued, or ended.
func (t *sessionTable) Validate(id string) (isTerminated bool, err error) {
	if !t.known(id) {
		return false, fmt.Errorf("unknown session id %q", id)
	}
	return false, nil
}

// Terminate ends a session (DELETE, the idle sweep, shutdown) and frees
// its slot.
func (t *sessionTable) Terminate(id string) (isNotAllowed bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if principal, ok := t.live[id]; ok {
		delete(t.live, id)
		t.forget(principal)
	}
	return false, nil
}

// Generate issues the claimed session.
func (c *sessionClaim) Generate() string { return c.t.issue(c) }

// Validate is the table's.
func (c *sessionClaim) Validate(id string) (bool, error) { return c.t.Validate(id) }

// Terminate is the table's.
func (c *sessionClaim) Terminate(id string) (bool, error) { return c.t.Terminate(id) }

// refuseSession answers an initialize for which no slot is free.
func refuseSession(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(sessionRetryAfter))
	http.Error(w, err.Error(), http.StatusServiceUnavailable)
}

var (
	_ server.SessionIdManagerResolver = (*sessionTable)(nil)
	_ server.SessionIdManager         = (*sessionTable)(nil)
	_ server.SessionIdManager         = (*sessionClaim)(nil)
)
