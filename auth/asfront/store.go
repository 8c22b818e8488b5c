package asfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/internal/lockedfile"
)

// Kind names a class of records in a Store.
type Kind string

// The kinds of records the front keeps.
const (
	// KindClient: a dynamically registered client (RFC 7591), by client_id.
	KindClient Kind = "client"
	// KindPending: an authorization request waiting for the IdP's callback,
	// by the state sent upstream.
	KindPending Kind = "pending"
	// KindConsent: a signed-in user waiting on the consent page, by id.
	KindConsent Kind = "consent"
	// KindCode: an authorization code, by its SHA-256.
	KindCode Kind = "code"
	// KindRefresh: a refresh token, by its SHA-256.
	KindRefresh Kind = "refresh"
	// KindGrant: a user's consent to a client, by principal and client id.
	KindGrant Kind = "grant"
)

// Errors a Store returns.
var (
	ErrNotFound = errors.New("asfront: no such record")
	ErrExists   = errors.New("asfront: record exists")
)

// Record is one stored item. Secrets (codes, refresh tokens) are stored
// only as their hash, in the key.
type Record struct {
	// Data is the kind's payload, JSON.
	Data json.RawMessage `json:"data"`
	// Family groups the code and refresh tokens of one grant, so a replay
	// revokes them together.
	Family string `json:"family,omitempty"`
	// Expires is when the record stops being usable; zero for never.
	Expires time.Time `json:"expires,omitzero"`
	// Used is set by Use: codes and refresh tokens are single-use.
	Used bool `json:"used,omitempty"`
	// Revoked is set by RevokeFamily.
	Revoked bool `json:"revoked,omitempty"`
}

// Store keeps the front's clients, grants, codes and refresh tokens, shared
// by every process (replica) that serves the same front. Implementations
// are safe for concurrent use, across processes too; Use is atomic.
// Records are kept at least until an hour after they expire (so a late
// replay is told "expired" and still revokes its family), then may go.
type Store interface {
	// Create stores a new record; ErrExists if the key is taken.
	Create(ctx context.Context, kind Kind, key string, r Record) error
	// Get returns a record, or ErrNotFound.
	Get(ctx context.Context, kind Kind, key string) (Record, error)
	// Use marks a record used and returns it as it was before: Used true
	// means someone used it first. ErrNotFound if there is none.
	Use(ctx context.Context, kind Kind, key string) (Record, error)
	// RevokeFamily marks every record of family revoked.
	RevokeFamily(ctx context.Context, family string) error
	// Count returns how many unexpired records of kind there are.
	Count(ctx context.Context, kind Kind) (int, error)
}

// purgeAfter is how long an expired record is kept.
const purgeAfter = time.Hour

// FileStore is a Store in one JSON file (mode 0600) for the processes of
// one machine: every operation takes an flock(2) on a lock file beside it,
// reads the file, and replaces it through a rename. Fine for the few
// hundred logins an hour of a team; use PostgreSQL for replicas.
type FileStore struct {
	path string
	now  func() time.Time
	mu   sync.Mutex // flock serialises processes; this, goroutines
}

// NewFileStore returns a store in the file path (its directory is made
// with mode 0700 on first write). now is the clock; nil means time.Now.
func NewFileStore(path string, now func() time.Time) *FileStore {
	if now == nil {
		now = time.Now
	}
	return &FileStore{path: path, now: now}
}

type fileData map[Kind]map[string]Record

// update runs fn on the file's contents under the lock and writes them
// back when fn reports a change.
func (s *FileStore) update(fn func(d fileData) (changed bool, err error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := lockedfile.Lock(context.Background(), s.path+".lock")
	if err != nil {
		return fmt.Errorf("asfront: store: %w", err)
	}
	defer unlock()

	d := fileData{}
	blob, err := os.ReadFile(s.path)
	switch {
	case err == nil:
		if err := json.Unmarshal(blob, &d); err != nil {
			return fmt.Errorf("asfront: store %s: %w", s.path, err)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return fmt.Errorf("asfront: store: %w", err)
	}
	changed, err := fn(d)
	if err != nil || !changed {
		return err
	}
	now := s.now()
	for _, m := range d {
		for k, r := range m {
			if !r.Expires.IsZero() && now.Sub(r.Expires) > purgeAfter {
				delete(m, k)
			}
		}
	}
	blob, err = json.Marshal(d)
	if err != nil {
		return fmt.Errorf("asfront: store: %w", err)
	}
	if err := lockedfile.Write(s.path, blob, 0o600); err != nil {
		return fmt.Errorf("asfront: store: %w", err)
	}
	return nil
}

// Create implements Store.
func (s *FileStore) Create(_ context.Context, kind Kind, key string, r Record) error {
	return s.update(func(d fileData) (bool, error) {
		m := d[kind]
		if m == nil {
			m = map[string]Record{}
			d[kind] = m
		}
		if _, ok := m[key]; ok {
			return false, ErrExists
		}
		m[key] = r
		return true, nil
	})
}

// Get implements Store.
func (s *FileStore) Get(_ context.Context, kind Kind, key string) (Record, error) {
	var out Record
	err := s.update(func(d fileData) (bool, error) {
		r, ok := d[kind][key]
		if !ok {
			return false, ErrNotFound
		}
		out = r
		return false, nil
	})
	return out, err
}

// Use implements Store.
func (s *FileStore) Use(_ context.Context, kind Kind, key string) (Record, error) {
	var out Record
	err := s.update(func(d fileData) (bool, error) {
		r, ok := d[kind][key]
		if !ok {
			return false, ErrNotFound
		}
		out = r
		r.Used = true
		d[kind][key] = r
		return !out.Used, nil
	})
	return out, err
}

// RevokeFamily implements Store.
func (s *FileStore) RevokeFamily(_ context.Context, family string) error {
	return s.update(func(d fileData) (bool, error) {
		changed := false
		for _, m := range d {
			for k, r := range m {
				if r.Family == family && !r.Revoked {
					r.Revoked = true
					m[k] = r
					changed = true
				}
			}
		}
		return changed, nil
	})
}

// Count implements Store.
func (s *FileStore) Count(_ context.Context, kind Kind) (int, error) {
	n := 0
	now := s.now()
	err := s.update(func(d fileData) (bool, error) {
		for _, r := range d[kind] {
			if r.Expires.IsZero() || now.Before(r.Expires) {
				n++
			}
		}
		return false, nil
	})
	return n, err
}

var _ Store = (*FileStore)(nil)
