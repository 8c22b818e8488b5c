package sessions

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/bubbuild/bub-mcp/modules"
)

// A Backend keeps a Store's tapes: files under $BUB_HOME (the default,
// kind "file"), this process's memory (kind "memory"), or a database
// shared by replicas (sessions/pgstore registers "postgres"). Tapes of temp/ sessions never reach a backend:
// they live in memory. The Tape above a backend does what every engine
// shares (ids, the summary, the AppendAsync queue, settings replay,
// spills); a backend only stores lines and the summary of them.
type Backend interface {
	// Tape returns the storage of the tape called name (a session's main
	// tape or its spill sidecar). It does no I/O: a tape is looked at
	// first by TapeBackend.Load.
	Tape(name string) TapeBackend
	// Close releases what the backend holds (connections, say). The
	// Store calls it once, after closing every tape.
	Close() error
}

// A TapeBackend stores one tape's lines. Its Tape calls it with its own
// mutex held, so calls on one TapeBackend never overlap; other processes
// and replicas may write the same tape meanwhile, and Append must exclude
// them. Positions are the backend's own, increasing along the tape (byte
// offsets for a file, row numbers for a table); a line's end is where the
// next line starts. The Summary a method receives is the Tape's, and the
// backend keeps it describing what is stored.
type TapeBackend interface {
	// Load makes sum describe the stored tape when its session is opened.
	// A backend that cannot reach its storage now may log that and
	// return nil, so the session opens with what it knows.
	Load(sum *Summary) error
	// Refresh folds into sum what others stored since. With fresh false
	// it may answer from a summary a short interval old (Settings, asked
	// on every request, then costs almost nothing).
	Refresh(sum *Summary, fresh bool) error
	// Append stores lines after the tape's end, excluding every other
	// writer of the tape: it first brings sum up to date, then calls
	// build with it (build assigns the ids after sum's last one and may
	// decide to store nothing), stores what build returns in one go and
	// folds each line into sum with Summary.Add. sync asks for the lines
	// to be durable before Append returns. When it fails, sum still
	// describes what is stored: lines folded into it were stored (a
	// failed fsync after a good write, say), others were not.
	Append(sum *Summary, build func(cur *Summary) []Line, sync bool) error
	// Open returns a reader of the lines sum describes, [0, sum.Size()),
	// consistent with sum even if the tape is replaced meanwhile; it may
	// refresh sum to get such a view.
	Open(sum *Summary) (Source, error)
	// Reset empties the tape, first moving its lines to an archive when
	// stamp is set (named after the tape and stamp, never overwriting
	// one; mustArchive makes an archive even of a tape never stored). It
	// returns where the archive is ("" when none was made) and leaves sum
	// empty. On an archive failure nothing is reset.
	Reset(sum *Summary, stamp string, mustArchive bool) (string, error)
	// Sync makes everything stored durable.
	Sync() error
	// Close releases the tape's storage; sum is its final summary.
	Close(sum *Summary) error
}

// A Source reads one consistent view of a tape for one reader.
type Source interface {
	// Forward calls fn for each line from position from on, oldest
	// first, until fn returns false. line is only valid during the call.
	Forward(from int64, fn func(pos, end int64, line []byte) bool) error
	// Backward calls fn for each line, newest first, until fn returns
	// false.
	Backward(fn func(pos, end int64, line []byte) bool) error
	// Close releases the view.
	Close() error
}

// Summary is all a Tape keeps in memory of its stored lines, whatever
// their number: where they end, the highest id, counts, the last anchor,
// the settings and the latest token usage. A backend persists it as JSON
// where it keeps no file to rebuild it from, and folds the lines it stores
// into it with Add.
type Summary struct{ st state }

// Size is the backend's measure of how much of the tape the summary
// covers: the file's length for the file store, the last row for a table.
func (s *Summary) Size() int64 { return s.st.Size }

// SetSize records how much of the tape the summary covers, after Add.
func (s *Summary) SetSize(n int64) { s.st.Size = n }

// LastID is the highest entry id stored.
func (s *Summary) LastID() int { return s.st.LastID }

// Add folds l, just stored at [pos, end), in as the tape's newest line.
// It leaves Size alone.
func (s *Summary) Add(l Line, pos, end int64) { s.st.add(l.h, pos, end-pos) }

// MarshalJSON encodes the summary for a backend that stores it.
func (s Summary) MarshalJSON() ([]byte, error) { return json.Marshal(s.st) }

// UnmarshalJSON decodes what MarshalJSON encoded.
func (s *Summary) UnmarshalJSON(b []byte) error {
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("sessions: tape summary: %w", err)
	}
	s.st = st
	return nil
}

// Line is one entry ready to store: Text is its JSON object and a newline,
// byte for byte what the file store writes, and the line carries what the
// summary needs of it, so a backend folds it without parsing it again.
type Line struct {
	Text []byte
	h    header
}

// BackendOptions is what a Store gives the backend it opens.
type BackendOptions struct {
	// Home is the store's $BUB_HOME, absolute.
	Home string
	// DSN says where the backend's data lives, in the backend's own
	// syntax (a PostgreSQL connection string, say); the file store
	// ignores it.
	DSN string
	// PoolSize caps the backend's connections; 0 means its default.
	PoolSize int
	// Logger receives the backend's warnings; never nil.
	Logger *slog.Logger
}

// OpenBackend makes a Backend; a store package registers one under its
// kind with Register.
type OpenBackend func(o BackendOptions) (Backend, error)

// StoreNamespace is the module namespace of stores: [store] kind =
// "<kind>" picks the module store.<kind>, and the table's other keys are
// that module's own.
const StoreNamespace = "store"

// StoreModule is a store module, registered in package modules under the
// ID "store.<kind>" ("store.file" and "store.memory" here, "store.postgres" in
// sessions/pgstore). The application decodes the [store] table into a
// new instance and opens the Store's backend with it.
type StoreModule interface {
	modules.Module
	// OpenBackend opens the backend. A module configured by its own
	// keys uses them; one registered with Register reads o.DSN and
	// o.PoolSize.
	OpenBackend(o BackendOptions) (Backend, error)
}

// funcStore is a store registered with Register.
type funcStore struct {
	kind string
	open OpenBackend
}

func (m *funcStore) BubModule() modules.Info {
	return modules.Info{ID: StoreNamespace + "." + m.kind, New: func() modules.Module { return m }}
}

func (m *funcStore) OpenBackend(o BackendOptions) (Backend, error) { return m.open(o) }

func init() { Register("file", openFileBackend) }

// Register makes a backend available under kind, for [Options.Store]: it
// registers the module store.<kind> (see StoreModule) with no keys of its
// own. A store package calls it from init, so a blank import enables it
// (the database/sql driver pattern). It panics when open is nil, kind is
// empty or has a dot, or kind is registered already.
func Register(kind string, open OpenBackend) {
	if open == nil {
		panic("sessions: Register backend is nil")
	}
	if kind == "" {
		panic("sessions: Register with an empty kind")
	}
	if strings.Contains(kind, ".") {
		panic("sessions: Register of " + kind + ": a kind has no dots (it is the last word of the module ID)")
	}
	modules.Register(&funcStore{kind, open})
}

// Backends returns the registered kinds, sorted.
func Backends() []string { return modules.Names(StoreNamespace) }

// lookupStore returns a new instance of the store module of kind ("" is
// "file").
func lookupStore(kind string) (StoreModule, error) {
	if kind == "" {
		kind = "file"
	}
	info, err := modules.Lookup(StoreNamespace + "." + kind)
	if err != nil {
		return nil, fmt.Errorf("sessions: unknown store %q (forgotten import?)", kind)
	}
	m, ok := info.New().(StoreModule)
	if !ok {
		return nil, fmt.Errorf("sessions: module %s opens no store (it lacks OpenBackend)", info.ID)
	}
	return m, nil
}
