package sessions

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrClosed is returned by every write after [Store.Close].
var ErrClosed = errors.New("sessions: store closed")

// DefaultCommitInterval is the group-commit interval used when
// [Options.CommitInterval] is zero: short enough that an audit entry reaches
// the kernel well before a human notices, long enough to batch a burst of
// loop events into one write.
const DefaultCommitInterval = 50 * time.Millisecond

// Options tune a [Store]. A nil *Options means all defaults; Open copies the
// struct, so changing it afterwards has no effect.
type Options struct {
	// CommitInterval is the longest an entry from [Tape.AppendAsync] waits
	// in memory before it is written, and so the most a process crash can
	// lose of the audit trail. Zero means DefaultCommitInterval.
	CommitInterval time.Duration

	// SyncCommits makes every group commit fsync as well as write, so an OS
	// crash or power loss also loses at most one commit interval of
	// asynchronous entries. False (the default) leaves them in the page
	// cache, which survives a process crash but not a kernel one.
	SyncCommits bool

	// Logger receives warnings (torn lines skipped, failed background
	// commits). Nil means slog.Default().
	Logger *slog.Logger

	// Store is the kind of backend that keeps tapes, settings and spill
	// chunks: "" or "file" for files under home/tapes, or a kind a store
	// package registered (import sessions/pgstore for "postgres", which
	// replicas share). An unknown kind fails Open naming the missing
	// import.
	Store string
	// DSN tells the backend where its data lives (for "postgres", a
	// connection string); the file store ignores it.
	DSN string
	// PoolSize caps the backend's connections; 0 means its default.
	PoolSize int
	// Module is the store module to open, configured (the application
	// decodes [store] into it); nil means a new instance of the one Store
	// names, which reads DSN and PoolSize.
	Module StoreModule
}

// Store owns the session tapes under one $BUB_HOME and the background
// goroutine that group-commits their asynchronous entries. It is safe for
// concurrent use; open one per process and Close it on shutdown.
type Store struct {
	home    string
	opts    Options
	log     *slog.Logger
	backend Backend

	mu       sync.Mutex
	closed   bool
	sessions map[sessionKey]*sessionSlot

	// resolved memoises resolveExisting for workspaces that exist:
	// Session runs on every tool call (three times per MCP tools/call),
	// and EvalSymlinks lstats every path component.
	resolved sync.Map // workspace as given → resolved path

	dirtyMu sync.Mutex
	dirty   map[*Tape]struct{}
	kick    chan struct{}
	quit    chan struct{}
	done    chan struct{}
}

// sessionSlot lets concurrent Session calls for one key share a single load.
type sessionSlot struct {
	ready chan struct{}
	sess  *Session
	err   error
}

// DefaultHome returns $BUB_HOME, or ~/.bub when it is unset, the same
// default the Python framework uses, so both can share one home. A leading
// "~/" in $BUB_HOME is expanded.
func DefaultHome() (string, error) {
	if h := os.Getenv("BUB_HOME"); h != "" {
		if h == "~" || strings.HasPrefix(h, "~/") {
			u, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("sessions: expand BUB_HOME: %w", err)
			}
			h = filepath.Join(u, strings.TrimPrefix(h, "~"))
		}
		return h, nil
	}
	u, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("sessions: locate home directory: %w", err)
	}
	return filepath.Join(u, ".bub"), nil
}

// Open prepares home (creating it and home/tapes with mode 0700, since tapes
// hold whole conversations) and starts the group-commit goroutine. Tapes
// are read lazily, when their session is first asked for.
func Open(home string, opts *Options) (*Store, error) {
	if home == "" {
		return nil, errors.New("sessions: empty home directory")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = DefaultCommitInterval
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	abs, err := filepath.Abs(home)
	if err != nil {
		return nil, fmt.Errorf("sessions: resolve home: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("sessions: create home directory: %w", err)
	}
	mod := o.Module
	if mod == nil {
		if mod, err = lookupStore(o.Store); err != nil {
			return nil, err
		}
	}
	backend, err := mod.OpenBackend(BackendOptions{Home: abs, DSN: o.DSN, PoolSize: o.PoolSize, Logger: log})
	if err != nil {
		return nil, err
	}
	s := &Store{
		backend:  backend,
		home:     abs,
		opts:     o,
		log:      log,
		sessions: map[sessionKey]*sessionSlot{},
		dirty:    map[*Tape]struct{}{},
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go s.commitLoop()
	return s, nil
}

// Home is the directory the store was opened on, made absolute.
func (s *Store) Home() string { return s.home }

// TapeName is the file name (without .jsonl) Bub gives a session's tape:
// md5(workspace)[:16] + "__" + md5(sessionID)[:16], hex. It hashes the
// workspace exactly as given; [Store.Session] resolves it first, as Bub does.
func TapeName(workspace, sessionID string) string {
	w := md5.Sum([]byte(workspace))
	i := md5.Sum([]byte(sessionID))
	return hex.EncodeToString(w[:])[:16] + "__" + hex.EncodeToString(i[:])[:16]
}

// resolveExisting mirrors Python's Path(workspace).resolve(): absolute,
// cleaned, symlinks followed when the path exists. It also reports whether
// the path exists (symlinks were followed).
func resolveExisting(ws string) (string, bool) {
	abs, err := filepath.Abs(ws)
	if err != nil {
		return filepath.Clean(ws), false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, true
	}
	return abs, false
}

// resolve is resolveExisting, memoised once the path exists (a missing one
// may still appear, so it is not cached).
func (s *Store) resolve(ws string) string {
	if r, ok := s.resolved.Load(ws); ok {
		return r.(string)
	}
	r, ok := resolveExisting(ws)
	if ok {
		s.resolved.Store(ws, r)
	}
	return r
}

// IsTemp reports whether a session id names a throw-away session whose tape
// and spills live in memory only (subagents started with session="temp").
func IsTemp(sessionID string) bool { return strings.HasPrefix(sessionID, "temp/") }

// Session returns the session for (workspace, id), loading its tape on first
// use. The workspace is resolved first (made absolute, symlinks followed),
// as Bub's Path.resolve() does, so both name the tape alike. Every call
// with the same resolved workspace and id returns the same *Session, so its
// tape has a single writer in this process. Ids starting with "temp/" give
// memory-only sessions.
func (s *Store) Session(workspace, id string) (*Session, error) {
	ws := s.resolve(workspace)
	key := sessionKey{ws, id}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if sl, ok := s.sessions[key]; ok {
		s.mu.Unlock()
		<-sl.ready
		return sl.sess, sl.err
	}
	sl := &sessionSlot{ready: make(chan struct{})}
	s.sessions[key] = sl
	s.mu.Unlock()

	sess, err := s.openSession(ws, id)

	s.mu.Lock()
	if err == nil && s.closed {
		sess, err = nil, ErrClosed
	}
	if err != nil {
		delete(s.sessions, key)
	}
	sl.sess, sl.err = sess, err
	s.mu.Unlock()
	close(sl.ready)
	return sess, err
}

// sessionKey names a session in the Store: its resolved workspace and id.
// A struct, not their concatenation: Session runs several times per call.
type sessionKey struct{ workspace, id string }

func (s *Store) openSession(ws, id string) (*Session, error) {
	sess := &Session{store: s, workspace: ws, id: id, temp: IsTemp(id)}
	t := newTape(s, TapeName(ws, id), sess.temp)
	if err := t.load(); err != nil {
		return nil, err
	}
	sess.tape = t
	return sess, nil
}

// Release lets go of a session the caller is done with, such as a
// subagent's temporary one: its tape is flushed and closed and its memory
// freed. A later Session call for the same key loads it again. Releasing
// a session nobody opened does nothing.
func (s *Store) Release(workspace, id string) error {
	key := sessionKey{s.resolve(workspace), id}
	s.mu.Lock()
	sl, ok := s.sessions[key]
	if ok {
		delete(s.sessions, key)
	}
	s.mu.Unlock()
	if !ok {
		return nil
	}
	<-sl.ready
	if sl.sess == nil {
		return nil
	}
	s.dirtyMu.Lock()
	delete(s.dirty, sl.sess.tape)
	s.dirtyMu.Unlock()
	return sl.sess.close()
}

// Close writes every queued entry, fsyncs and closes all tape files, and
// stops the group-commit goroutine. Later writes fail with ErrClosed. Close
// is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var open []*Session
	for _, sl := range s.sessions {
		if sl.sess != nil {
			open = append(open, sl.sess)
		}
	}
	s.mu.Unlock()

	close(s.quit)
	<-s.done

	var errs []error
	for _, sess := range open {
		errs = append(errs, sess.close())
	}
	errs = append(errs, s.backend.Close())
	return errors.Join(errs...)
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// markDirty queues t for the next group commit.
func (s *Store) markDirty(t *Tape) {
	s.dirtyMu.Lock()
	s.dirty[t] = struct{}{}
	s.dirtyMu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// commitLoop is the store's one background goroutine. It sleeps until some
// tape has queued entries, waits one commit interval so a burst lands in a
// single write, then commits every dirty tape. It exits, after a last
// commit, when Close closes quit.
func (s *Store) commitLoop() {
	defer close(s.done)
	for {
		select {
		case <-s.kick:
		case <-s.quit:
			s.commitDirty()
			return
		}
		timer := time.NewTimer(s.opts.CommitInterval)
		select {
		case <-timer.C:
		case <-s.quit:
			timer.Stop()
			s.commitDirty()
			return
		}
		s.commitDirty()
	}
}

func (s *Store) commitDirty() {
	s.dirtyMu.Lock()
	dirty := s.dirty
	s.dirty = map[*Tape]struct{}{}
	s.dirtyMu.Unlock()
	for t := range dirty {
		t.commit()
	}
}
