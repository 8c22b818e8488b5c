package confirm

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The approvals queue is how a call reaches a person who is not behind the
// client: the waiting server puts the call in the queue, the operator
// console (bub-mcp console, another process) lists it and writes the
// decision, and the server, watching, goes on. Every server and console
// sharing a $BUB_HOME (or a store) share the queue.

// Pending is a call waiting for a decision.
type Pending struct {
	// ID names the call in the queue; random, 26 characters of base32.
	ID string `json:"id"`
	// Created is when the call started waiting; Deadline when it stops
	// (the profile's confirm_timeout).
	Created  time.Time `json:"created"`
	Deadline time.Time `json:"deadline"`
	// Tool is the tool's runtime name; Args its arguments, cut to
	// MaxQueuedArgs bytes (ArgsBytes is then the full size).
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`
	ArgsBytes int             `json:"args_bytes,omitempty"`
	// Nested is set for a call made by code inside run_code.
	Nested bool `json:"nested,omitempty"`
	// Who and where from.
	Principal string `json:"principal,omitempty"`
	Profile   string `json:"profile"`
	Client    string `json:"client,omitempty"`
	Transport string `json:"transport,omitempty"`
	Session   string `json:"session,omitempty"`
	// Host and PID name the waiting server process.
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
}

// Decision is a person's answer to a Pending call.
type Decision struct {
	Approved bool      `json:"approved"`
	Reason   string    `json:"reason,omitempty"`
	By       string    `json:"by,omitempty"`
	At       time.Time `json:"at"`
}

// Queue holds calls waiting for a person's decision. Implementations are
// safe for concurrent use by several processes sharing their storage.
type Queue interface {
	// Add puts p in the queue (p.ID set by the caller).
	Add(ctx context.Context, p Pending) error
	// Wait returns p's decision once one is made, checking at least every
	// PollInterval, or ctx's error when ctx ends first.
	Wait(ctx context.Context, id string) (Decision, error)
	// Remove takes the call out of the queue, with its decision if any;
	// removing an unknown id is not an error.
	Remove(ctx context.Context, id string) error
	// List returns the calls still waiting for a decision, oldest first;
	// calls whose deadline passed are left out.
	List(ctx context.Context) ([]Pending, error)
	// Decide records d for the call id. Only the first decision counts:
	// a call already decided, or no longer waiting, fails with
	// ErrNotPending.
	Decide(ctx context.Context, id string, d Decision) error
}

// ErrNotPending is Decide's answer for a call that is not waiting (any
// more): decided already, withdrawn, timed out or unknown.
var ErrNotPending = errors.New("confirm: the call is not waiting for a decision (decided already, timed out or withdrawn)")

// PollInterval is how often a waiting call looks for its decision: the
// call goes on within this long of the decision.
const PollInterval = 100 * time.Millisecond

// MaxQueuedArgs bounds the arguments kept with a pending call.
const MaxQueuedArgs = 64 << 10

// maxReason bounds a decision's reason.
const maxReason = 2000

// staleAfter is how long past its deadline a pending file is kept before
// List removes it (its server died without withdrawing it).
const staleAfter = time.Minute

// NewID returns a new random call id.
func NewID() string { return strings.ToLower(rand.Text()) }

// validID reports whether id could have come from NewID (ids name files).
func validID(id string) bool {
	if len(id) < 16 || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// FileQueue is the queue as files in one directory ($BUB_HOME/approvals):
// <id>.json for each waiting call and <id>.decision.json for its
// decision, each written whole to a temporary file and renamed (a reader
// never sees half a file). The first decision is made with a hard link,
// which fails when one exists, so two consoles cannot both decide.
type FileQueue struct {
	dir string
}

// NewFileQueue returns the queue kept in dir, created (mode 0700: the
// arguments may be secrets) on first use.
func NewFileQueue(dir string) *FileQueue { return &FileQueue{dir: dir} }

// Dir is the directory the queue is kept in.
func (q *FileQueue) Dir() string { return q.dir }

func (q *FileQueue) pendingPath(id string) string  { return filepath.Join(q.dir, id+".json") }
func (q *FileQueue) decisionPath(id string) string { return filepath.Join(q.dir, id+".decision.json") }

// writeTemp writes v as JSON to a new temporary file in the queue's
// directory and returns its name.
func (q *FileQueue) writeTemp(v any) (string, error) {
	if err := os.MkdirAll(q.dir, 0o700); err != nil {
		return "", fmt.Errorf("confirm: approvals queue: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(q.dir, ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("confirm: approvals queue: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("confirm: approvals queue: %w", err)
	}
	return f.Name(), nil
}

// Add writes the pending call's file.
func (q *FileQueue) Add(ctx context.Context, p Pending) error {
	if !validID(p.ID) {
		return fmt.Errorf("confirm: bad approval id %q", p.ID)
	}
	tmp, err := q.writeTemp(p)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, q.pendingPath(p.ID)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("confirm: approvals queue: %w", err)
	}
	return nil
}

// Wait polls for the decision file.
func (q *FileQueue) Wait(ctx context.Context, id string) (Decision, error) {
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		b, err := os.ReadFile(q.decisionPath(id))
		if err == nil {
			var d Decision
			if err := json.Unmarshal(b, &d); err != nil {
				return Decision{}, fmt.Errorf("confirm: approvals queue: decision for %s: %w", id, err)
			}
			return d, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return Decision{}, fmt.Errorf("confirm: approvals queue: %w", err)
		}
		select {
		case <-ctx.Done():
			return Decision{}, ctx.Err()
		case <-t.C:
		}
	}
}

// Remove deletes the call's files. The pending file goes first, so a
// console cannot decide a call once its server stopped waiting.
func (q *FileQueue) Remove(ctx context.Context, id string) error {
	if !validID(id) {
		return nil
	}
	err1 := os.Remove(q.pendingPath(id))
	err2 := os.Remove(q.decisionPath(id))
	var errs []error
	for _, err := range []error{err1, err2} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("confirm: approvals queue: %w", errors.Join(errs...))
	}
	return nil
}

// List reads the pending files without a decision, removing those of
// servers that stopped waiting long ago.
func (q *FileQueue) List(ctx context.Context) ([]Pending, error) {
	ents, err := os.ReadDir(q.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("confirm: approvals queue: %w", err)
	}
	decided := map[string]bool{}
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".decision.json"); ok {
			decided[id] = true
		}
	}
	now := time.Now()
	var out []Pending
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasSuffix(id, ".decision") || !validID(id) || decided[id] {
			continue
		}
		b, err := os.ReadFile(filepath.Join(q.dir, e.Name()))
		if err != nil {
			continue // withdrawn meanwhile
		}
		var p Pending
		if json.Unmarshal(b, &p) != nil || p.ID != id {
			continue
		}
		if now.After(p.Deadline) {
			if now.After(p.Deadline.Add(staleAfter)) {
				_ = q.Remove(ctx, id)
			}
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pending) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Decide links the decision into place, which fails if one exists.
func (q *FileQueue) Decide(ctx context.Context, id string, d Decision) error {
	if !validID(id) {
		return ErrNotPending
	}
	b, err := os.ReadFile(q.pendingPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotPending
	}
	if err != nil {
		return fmt.Errorf("confirm: approvals queue: %w", err)
	}
	var p Pending
	if json.Unmarshal(b, &p) == nil && time.Now().After(p.Deadline) {
		return ErrNotPending
	}
	if len(d.Reason) > maxReason {
		return fmt.Errorf("confirm: a reason is at most %d bytes", maxReason)
	}
	if d.At.IsZero() {
		d.At = time.Now().UTC()
	}
	tmp, err := q.writeTemp(d)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, q.decisionPath(id)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrNotPending
		}
		return fmt.Errorf("confirm: approvals queue: %w", err)
	}
	return nil
}

var _ Queue = (*FileQueue)(nil)
