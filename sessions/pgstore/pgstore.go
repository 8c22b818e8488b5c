// Package pgstore keeps session tapes, settings and spill chunks in
// PostgreSQL, so replicas share them. It registers the module
// store.postgres when imported, the database/sql driver pattern, so only a
// program that blank-imports it links pgx:
//
//	import _ "github.com/bubbuild/bub-mcp/sessions/pgstore"
//
// Each tape is rows of its JSONL lines, byte for byte what the file store
// writes, numbered by position (seq), and the tape's summary
// (sessions.Summary) in one row per tape. A write locks that row (SELECT
// ... FOR UPDATE), gives ids after the summary's, inserts the lines and
// updates the summary in one transaction, so replicas never duplicate an
// id and a committed entry is durable. Every write and reset takes a fresh
// version from one sequence; a replica refreshes a tape's summary when the
// version differs, checking at most every RefreshInterval, so it sees
// another's settings switch within that.
package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/pgschema"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Kind is the store kind this package registers: [store] kind =
// "postgres" in bub.toml, sessions.Options.Store in Go.
const Kind = "postgres"

func init() { app.RegisterModule(new(Module)) }

// Module is the module store.postgres: its fields are the keys of
// [store] with kind = "postgres".
type Module struct {
	// DSN is the PostgreSQL connection string; DSNEnv names a variable
	// holding it instead (keeps passwords out of the file).
	DSN    string `toml:"dsn"`
	DSNEnv string `toml:"dsn_env"`
	// PoolSize caps the store's connections; 0 means pgxpool's default.
	PoolSize int `toml:"pool_size"`

	dsn string // DSN, or DSNEnv's value
}

// BubModule registers the module as store.postgres.
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: sessions.StoreNamespace + "." + Kind, New: func() app.Module { return new(Module) }}
}

// ProvisionUse checks the keys and reads the connection string, naming the
// key at fault.
func (m *Module) ProvisionUse(ctx context.Context, a *app.App, at *config.ModuleRef) error {
	if m.PoolSize < 0 {
		return at.Fail("must be >= 0", "pool_size")
	}
	switch {
	case m.DSN != "" && m.DSNEnv != "":
		return at.Fail("set dsn or dsn_env, not both", "dsn")
	case m.DSNEnv != "":
		if m.dsn = strings.TrimSpace(a.Getenv(m.DSNEnv)); m.dsn == "" {
			return at.Fail("environment variable "+m.DSNEnv+" is empty or unset", "dsn_env")
		}
	case m.DSN == "":
		return at.FailKind(`kind = "` + Kind + `" needs dsn or dsn_env`)
	default:
		m.dsn = m.DSN
	}
	return nil
}

// ConnString is the connection string the module was configured with,
// for what else keeps its data in the same database (the audit log).
func (m *Module) ConnString() string { return m.dsn }

// OpenBackend opens the store with the module's keys; a module made
// without them (sessions.Options.Store = "postgres") uses o's.
func (m *Module) OpenBackend(o sessions.BackendOptions) (sessions.Backend, error) {
	if m.dsn != "" {
		o.DSN = m.dsn
	}
	if m.PoolSize > 0 {
		o.PoolSize = m.PoolSize
	}
	return Open(o)
}

// RefreshInterval is how stale a replica's view of a tape may be: the
// most a settings switch made elsewhere takes to show.
const RefreshInterval = 250 * time.Millisecond

// timeout bounds one store operation, so a database that stopped
// answering fails calls instead of hanging them.
const timeout = 10 * time.Second

// page is how many rows a reader fetches at a time.
const page = 256

// migrations are the schema versions, applied in order at start. A
// released step is never edited; changes are new steps. The name
// "sessions" they are recorded under predates this package.
var migrations = []string{
	`CREATE SEQUENCE bub_tape_version;
	 CREATE TABLE bub_tapes (
		name    text PRIMARY KEY,
		seq     bigint NOT NULL,
		version bigint NOT NULL,
		summary jsonb NOT NULL
	 );
	 CREATE TABLE bub_tape_lines (
		tape text NOT NULL,
		seq  bigint NOT NULL,
		line text NOT NULL,
		PRIMARY KEY (tape, seq)
	 );`,
}

// Store is the backend: a connection pool and the schema's state.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu       sync.Mutex
	migrated bool
}

// Open makes the pool on o.DSN (at most o.PoolSize connections; 0 means
// pgx's default, max(4, CPUs)) and migrates the schema. A database that
// cannot be reached now is not an error: the schema is migrated on first
// use, and until then calls that need the store fail saying why.
func Open(o sessions.BackendOptions) (sessions.Backend, error) {
	if o.DSN == "" {
		return nil, errors.New("pgstore: no connection string (dsn)")
	}
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgstore: postgres dsn: %w", err)
	}
	if o.PoolSize > 0 {
		cfg.MaxConns = int32(o.PoolSize)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Store{pool: pool, log: log}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.ensureSchema(ctx); err != nil {
		log.Warn("pgstore: postgres not ready; retrying on first use", "error", err)
	}
	return s, nil
}

// ensureSchema applies the migrations not applied yet, under an advisory
// lock so replicas starting together migrate once.
func (s *Store) ensureSchema(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.migrated {
		return nil
	}
	if err := pgschema.Migrate(ctx, s.pool, "sessions", migrations); err != nil {
		return fmt.Errorf("pgstore: schema: %w", err)
	}
	s.migrated = true
	return nil
}

// Tape returns the rows of the tape called name.
func (s *Store) Tape(name string) sessions.TapeBackend { return &tape{s: s, name: name} }

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// tape is one tape's rows and the version of the summary its Tape holds.
// Its Tape's mutex guards the fields.
type tape struct {
	s       *Store
	name    string
	version int64
	checked time.Time
}

func (t *tape) fail(err error) error {
	return fmt.Errorf("pgstore: tape %s: %w", t.name, err)
}

// Load refreshes; a database that does not answer is logged, so the
// session still opens (with default settings) and writes say what fails.
func (t *tape) Load(sum *sessions.Summary) error {
	if err := t.Refresh(sum, true); err != nil {
		t.s.log.Warn("pgstore: loading a tape", "tape", t.name, "error", err)
	}
	return nil
}

// Refresh fetches the tape's summary when it changed elsewhere; with
// fresh false at most once per RefreshInterval.
func (t *tape) Refresh(sum *sessions.Summary, fresh bool) error {
	if !fresh && time.Since(t.checked) < RefreshInterval {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.s.ensureSchema(ctx); err != nil {
		return err
	}
	var version int64
	var raw []byte
	err := t.s.pool.QueryRow(ctx, `SELECT version, summary FROM bub_tapes WHERE name = $1`, t.name).Scan(&version, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		*sum, t.version, t.checked = sessions.Summary{}, 0, time.Now()
		return nil
	}
	if err != nil {
		return t.fail(err)
	}
	t.checked = time.Now()
	if version == t.version {
		return nil
	}
	var st sessions.Summary
	if err := json.Unmarshal(raw, &st); err != nil {
		return t.fail(err)
	}
	*sum, t.version = st, version
	return nil
}

// Append runs one transaction; sync is moot, since every commit is
// durable. A row's position is its seq (from 1), its end seq+1, and the
// summary's Size is the last seq.
func (t *tape) Append(sum *sessions.Summary, build func(*sessions.Summary) []sessions.Line, _ bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.s.ensureSchema(ctx); err != nil {
		return err
	}
	var st sessions.Summary
	var version int64
	err := pgx.BeginFunc(ctx, t.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO bub_tapes (name, seq, version, summary) VALUES ($1, 0, nextval('bub_tape_version'), '{}')
			ON CONFLICT (name) DO NOTHING`, t.name); err != nil {
			return err
		}
		var raw []byte
		if err := tx.QueryRow(ctx, `SELECT summary FROM bub_tapes WHERE name = $1 FOR UPDATE`, t.name).Scan(&raw); err != nil {
			return err
		}
		st = sessions.Summary{}
		if err := json.Unmarshal(raw, &st); err != nil {
			return err
		}
		lines := build(&st)
		if len(lines) == 0 {
			return nil
		}
		seqs := make([]int64, len(lines))
		texts := make([]string, len(lines))
		for i, l := range lines {
			seqs[i] = st.Size() + 1
			texts[i] = string(l.Text[:len(l.Text)-1])
			st.Add(l, seqs[i], seqs[i]+1)
			st.SetSize(seqs[i])
		}
		if _, err := tx.Exec(ctx, `INSERT INTO bub_tape_lines (tape, seq, line) SELECT $1, s, l FROM unnest($2::bigint[], $3::text[]) AS u(s, l)`,
			t.name, seqs, texts); err != nil {
			return err
		}
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `UPDATE bub_tapes SET seq = $2, summary = $3, version = nextval('bub_tape_version') WHERE name = $1 RETURNING version`,
			t.name, st.Size(), b).Scan(&version)
	})
	if err != nil {
		return t.fail(err)
	}
	if version != 0 {
		*sum, t.version, t.checked = st, version, time.Now()
	}
	return nil
}

// Open reads the rows up to the position sum covers.
func (t *tape) Open(sum *sessions.Summary) (sessions.Source, error) {
	return &source{t: t, max: sum.Size()}, nil
}

// Reset moves the tape's rows to an archive tape named
// <name>.<stamp>.bak, or deletes them.
func (t *tape) Reset(sum *sessions.Summary, stamp string, mustArchive bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.s.ensureSchema(ctx); err != nil {
		return "", err
	}
	var archived string
	err := pgx.BeginFunc(ctx, t.s.pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bub_tapes WHERE name = $1 FOR UPDATE)`, t.name).Scan(&exists); err != nil {
			return err
		}
		if stamp == "" {
			if _, err := tx.Exec(ctx, `DELETE FROM bub_tape_lines WHERE tape = $1`, t.name); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM bub_tapes WHERE name = $1`, t.name)
			return err
		}
		if !exists && !mustArchive {
			return nil
		}
		for i := 1; i < 1000; i++ {
			name := t.name + "." + stamp + ".bak"
			if i > 1 {
				name = t.name + "." + stamp + "-" + strconv.Itoa(i) + ".bak"
			}
			var taken bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bub_tapes WHERE name = $1)`, name).Scan(&taken); err != nil {
				return err
			}
			if taken {
				continue
			}
			if !exists {
				_, err := tx.Exec(ctx, `INSERT INTO bub_tapes (name, seq, version, summary) VALUES ($1, 0, nextval('bub_tape_version'), '{}')`, name)
				archived = "postgres:" + name
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE bub_tape_lines SET tape = $2 WHERE tape = $1`, t.name, name); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE bub_tapes SET name = $2 WHERE name = $1`, t.name, name); err != nil {
				return err
			}
			archived = "postgres:" + name
			return nil
		}
		return errors.New("too many archives with the same timestamp")
	})
	if err != nil {
		return "", t.fail(err)
	}
	*sum, t.version, t.checked = sessions.Summary{}, 0, time.Time{}
	return archived, nil
}

// Sync has nothing to do: a committed transaction is durable.
func (t *tape) Sync() error { return nil }

// Close has nothing to release: the pool is the Store's.
func (t *tape) Close(*sessions.Summary) error { return nil }

// source reads a tape's rows up to the position the reader's summary
// covers, a page at a time.
type source struct {
	t   *tape
	max int64
}

func (s *source) Forward(from int64, fn func(pos, end int64, line []byte) bool) error {
	next := max(from, 1)
	for next <= s.max {
		rows, err := s.page(`SELECT seq, line FROM bub_tape_lines WHERE tape = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq LIMIT $4`, next)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		for _, r := range rows {
			if !fn(r.seq, r.seq+1, []byte(r.line)) {
				return nil
			}
			next = r.seq + 1
		}
	}
	return nil
}

func (s *source) Backward(fn func(pos, end int64, line []byte) bool) error {
	next := s.max
	for next >= 1 {
		rows, err := s.page(`SELECT seq, line FROM bub_tape_lines WHERE tape = $1 AND seq <= $2 AND seq <= $3 ORDER BY seq DESC LIMIT $4`, next)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		for _, r := range rows {
			if !fn(r.seq, r.seq+1, []byte(r.line)) {
				return nil
			}
			next = r.seq - 1
		}
	}
	return nil
}

func (s *source) Close() error { return nil }

type row struct {
	seq  int64
	line string
}

func (s *source) page(q string, at int64) ([]row, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rows, err := s.t.s.pool.Query(ctx, q, s.t.name, at, s.max, page)
	if err != nil {
		return nil, s.t.fail(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.seq, &x.line)
		return x, err
	})
	if err != nil {
		return nil, s.t.fail(err)
	}
	return out, nil
}

// Interface guards.
var (
	_ sessions.Backend     = (*Store)(nil)
	_ sessions.TapeBackend = (*tape)(nil)
	_ sessions.Source      = (*source)(nil)
)

var (
	_ sessions.StoreModule = (*Module)(nil)
	_ app.UseProvisioner   = (*Module)(nil)
)
