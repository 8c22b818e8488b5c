package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
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

// PinStore keeps the pin sets. The file store is the only one today; a
// store shared by replicas (PostgreSQL) implements the same three methods.
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
	var set PinSet
	if err := json.NewDecoder(&limitReader{r: f, n: maxPinFileBytes}).Decode(&set); err != nil {
		return nil, fmt.Errorf("upstream pins: %s: %w", s.file(server), err)
	}
	if set.Version != 1 {
		return nil, fmt.Errorf("upstream pins: %s: unknown version %d (want 1)", s.file(server), set.Version)
	}
	if set.Pins == nil {
		set.Pins = map[string]Pin{}
	}
	if set.Pending == nil {
		set.Pending = map[string]Pin{}
	}
	return &set, nil
}

// Update holds an exclusive lock (flock on <server>.pins.lock) across
// the read, fn and the atomic write, so a serving process and
// `bub-mcp upstreams approve` never lose each other's changes.
func (s FilePinStore) Update(server string, fn func(*PinSet) (*PinSet, bool, error)) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("upstream pins: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(s.Dir, server+".pins.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("upstream pins: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("upstream pins: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
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
	if err := writeFileAtomic(s.file(server), append(b, '\n')); err != nil {
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
