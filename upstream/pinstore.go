package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/bubbuild/bub-mcp/internal/lockedfile"
	"github.com/bubbuild/bub-mcp/sessions/pgstore/docstore"
)

// Pin is one tool definition a human (or first use) accepted.
type Pin struct {
	// SHA256 is the hex SHA-256 of Definition.
	SHA256 string `json:"sha256"`
	// Definition is the tool's canonical JSON (RFC 8785) of name, title,
	// description, inputSchema, outputSchema and annotations: kept so
	// that a changed definition can be shown as a diff.
	Definition json.RawMessage `json:"definition"`
	// Since is when it was pinned (or, pending, first seen).
	Since time.Time `json:"since"`
	// By is who accepted it: "first use", or the approving user.
	By string `json:"by,omitempty"`
	// Reason is why a pending definition waits: "changed", "new" or
	// "first list" (pin = "approve-first").
	Reason string `json:"reason,omitempty"`
}

// PinSet is one upstream server's pins and the definitions awaiting a
// human's approval, by the upstream's own tool name.
type PinSet struct {
	Version   int            `json:"version"`
	FirstSeen time.Time      `json:"first_seen"`
	Pins      map[string]Pin `json:"pins"`
	Pending   map[string]Pin `json:"pending"`
}

func newPinSet(now time.Time) *PinSet {
	return &PinSet{Version: 1, FirstSeen: now, Pins: map[string]Pin{}, Pending: map[string]Pin{}}
}

// PinStore keeps the pin sets: FilePinStore under $BUB_HOME, PGPinStore
// in the [store] database, shared by replicas.
type PinStore interface {
	// Load returns a server's pin set, nil when the server was never seen.
	Load(server string) (*PinSet, error)
	// Update runs fn on the server's current pin set (nil when none)
	// with every other writer, in any process, kept out; when fn reports
	// a change, the set it returns is stored.
	Update(server string, fn func(*PinSet) (*PinSet, bool, error)) error
	// Stamp is a value that changes whenever the server's pins are
	// stored: a running server polls it to pick up approvals.
	Stamp(server string) (string, error)
}

// PGPinStore keeps each server's pin set as a document of the [store]
// database (kind "upstream.pins"), so replicas and the operator's
// commands on other machines share pins, quarantines and approvals.
type PGPinStore struct{ Docs *docstore.Store }

const pinsKind = "upstream.pins"

// Load reads a server's pin set.
func (s PGPinStore) Load(server string) (*PinSet, error) {
	b, err := s.Docs.Load(context.Background(), pinsKind, server)
	if err != nil || b == nil {
		return nil, err
	}
	return decodePins(b, server)
}

// Update runs fn under the database's lock on the server's pin set.
func (s PGPinStore) Update(server string, fn func(*PinSet) (*PinSet, bool, error)) error {
	return s.Docs.Update(context.Background(), pinsKind, server, func(old []byte) ([]byte, bool, error) {
		var cur *PinSet
		if old != nil {
			var err error
			if cur, err = decodePins(old, server); err != nil {
				return nil, false, err
			}
		}
		set, changed, err := fn(cur)
		if err != nil || !changed {
			return nil, false, err
		}
		b, err := json.Marshal(set)
		if err != nil {
			return nil, false, fmt.Errorf("upstream pins: %w", err)
		}
		return b, true, nil
	})
}

// Stamp is the document's version.
func (s PGPinStore) Stamp(server string) (string, error) {
	return s.Docs.Stamp(context.Background(), pinsKind, server)
}

// decodePins reads a stored pin set, of either store; where names it (the
// file, or the server) for errors.
func decodePins(b []byte, where string) (*PinSet, error) {
	var set PinSet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("upstream pins: %s: %w", where, err)
	}
	if set.Version != 1 {
		return nil, fmt.Errorf("upstream pins: %s: unknown version %d (want 1)", where, set.Version)
	}
	if set.Pins == nil {
		set.Pins = map[string]Pin{}
	}
	if set.Pending == nil {
		set.Pending = map[string]Pin{}
	}
	return &set, nil
}

// maxPinFileBytes bounds a pins file: definitions of at most maxTools
// tools, twice.
const maxPinFileBytes = 64 << 20

// FilePinStore keeps each server's pins in Dir/<server>.pins.json
// (mode 0600, written atomically), with a lock file beside it.
type FilePinStore struct{ Dir string }

func (s FilePinStore) file(server string) string {
	return filepath.Join(s.Dir, server+".pins.json")
}

// Load reads a server's pins file.
func (s FilePinStore) Load(server string) (*PinSet, error) {
	f, err := os.Open(s.file(server))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("upstream pins: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(&limitReader{r: f, n: maxPinFileBytes})
	if err != nil {
		return nil, fmt.Errorf("upstream pins: %s: %w", s.file(server), err)
	}
	return decodePins(b, s.file(server))
}

// Update holds an exclusive lock (flock on <server>.pins.lock) across
// the read, fn and the atomic write, so a serving process and
// `bub-mcp upstreams approve` never lose each other's changes.
func (s FilePinStore) Update(server string, fn func(*PinSet) (*PinSet, bool, error)) error {
	unlock, err := lockedfile.Lock(context.Background(), filepath.Join(s.Dir, server+".pins.lock"))
	if err != nil {
		return fmt.Errorf("upstream pins: %w", err)
	}
	defer unlock()
	set, err := s.Load(server)
	if err != nil {
		return err
	}
	set, changed, err := fn(set)
	if err != nil || !changed {
		return err
	}
	b, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return fmt.Errorf("upstream pins: %w", err)
	}
	if err := lockedfile.Write(s.file(server), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("upstream pins: %w", err)
	}
	return nil
}

// Stamp is the pins file's modification time, size and inode (an atomic
// rename makes a new inode, so two writes within one mtime tick differ).
func (s FilePinStore) Stamp(server string) (string, error) {
	st, err := os.Stat(s.file(server))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	ino := uint64(0)
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = sys.Ino
	}
	return fmt.Sprintf("%d/%d/%d", st.ModTime().UnixNano(), st.Size(), ino), nil
}
