package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL store keeps each tape as rows of its JSONL lines, byte
// for byte what the file store writes, numbered by position (seq), and
// the tape's summary (see state) in one row per tape. A write locks that
// row (SELECT ... FOR UPDATE), gives ids after the summary's, inserts the
// lines and updates the summary in one transaction, so replicas never
// duplicate an id and a committed entry is durable. Every write and reset
// takes a fresh version from one sequence; a replica refreshes a tape's
// summary when the version differs, checking at most every
// pgRefreshInterval, so it sees another's settings switch within that.

// pgRefreshInterval is how stale a replica's view of a tape may be: the
// most a settings switch made elsewhere takes to show.
const pgRefreshInterval = 250 * time.Millisecond

// pgTimeout bounds one store operation, so a database that stopped
// answering fails calls instead of hanging them.
const pgTimeout = 10 * time.Second

// pgPage is how many rows a reader fetches at a time.
const pgPage = 256

// pgMigrations are the schema versions, applied in order at start. A
// released step is never edited; changes are new steps.
var pgMigrations = []string{
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

// pgStore is a Store's PostgreSQL connection pool and schema state.
type pgStore struct {
	pool *pgxpool.Pool

	mu       sync.Mutex
	migrated bool
}

// openPG makes the pool and migrates the schema. A database that cannot
// be reached now is not an error: the schema is migrated on first use,
// and until then calls that need the store fail saying why.
func openPG(dsn string, poolSize int, log interface{ Warn(string, ...any) }) (*pgStore, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("sessions: postgres dsn: %w", err)
	}
	if poolSize > 0 {
		cfg.MaxConns = int32(poolSize)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("sessions: postgres: %w", err)
	}
	p := &pgStore{pool: pool}
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	if err := p.ensureSchema(ctx); err != nil {
		log.Warn("sessions: postgres not ready; retrying on first use", "error", err)
	}
	return p, nil
}

// ensureSchema applies the migrations not applied yet, under an advisory
// lock so replicas starting together migrate once.
func (p *pgStore) ensureSchema(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.migrated {
		return nil
	}
	err := pgschema.Migrate(ctx, p.pool, "sessions", pgMigrations)
	if err != nil {
		return fmt.Errorf("sessions: postgres schema: %w", err)
	}
	p.migrated = true
	return nil
}

func (p *pgStore) close() { p.pool.Close() }

// pgTape is a tape's link to the store: its row name and the version of
// the summary the Tape holds.
type pgTape struct {
	s       *pgStore
	name    string
	version int64
	checked time.Time
}

func pgErr(name string, err error) error {
	return fmt.Errorf("sessions: postgres: tape %s: %w", name, err)
}

// pgWriteLocked is writeLocked for PostgreSQL. t.mu must be held.
func (t *Tape) pgWriteLocked(queued, ds []draft, forceSync bool, cond func(*state) bool) ([]Entry, error) {
	_ = forceSync // every commit is durable
	if len(queued) == 0 && len(ds) == 0 {
		return nil, nil
	}
	pt := t.pg
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	if err := pt.s.ensureSchema(ctx); err != nil {
		return nil, t.writeFailed(err)
	}
	var out []Entry
	var st state
	var version int64
	err := pgx.BeginFunc(ctx, pt.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO bub_tapes (name, seq, version, summary) VALUES ($1, 0, nextval('bub_tape_version'), '{}')
			ON CONFLICT (name) DO NOTHING`, pt.name); err != nil {
			return err
		}
		var raw []byte
		if err := tx.QueryRow(ctx, `SELECT summary FROM bub_tapes WHERE name = $1 FOR UPDATE`, pt.name).Scan(&raw); err != nil {
			return err
		}
		st = state{}
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		d := ds
		if cond != nil && !cond(&st) {
			d = nil
		}
		all := append(append([]draft(nil), queued...), d...)
		if len(all) == 0 {
			out = nil
			return nil
		}
		seqs := make([]int64, len(all))
		lines := make([]string, len(all))
		es := make([]Entry, len(all))
		for i, dr := range all {
			id := st.LastID + 1
			line := encodeLine(id, dr.kind, dr.payload, dr.meta, dr.date)
			es[i] = Entry{ID: id, Kind: dr.kind, Payload: dr.p, Meta: dr.m, Date: dr.date}
			seqs[i] = st.Size + 1
			lines[i] = string(line[:len(line)-1])
			st.add(header{id: id, kind: dr.kind, payload: dr.p}, seqs[i], 1)
			st.Size = seqs[i]
		}
		if _, err := tx.Exec(ctx, `INSERT INTO bub_tape_lines (tape, seq, line) SELECT $1, s, l FROM unnest($2::bigint[], $3::text[]) AS u(s, l)`,
			pt.name, seqs, lines); err != nil {
			return err
		}
		sum, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `UPDATE bub_tapes SET seq = $2, summary = $3, version = nextval('bub_tape_version') WHERE name = $1 RETURNING version`,
			pt.name, st.Size, sum).Scan(&version); err != nil {
			return err
		}
		out = es[len(queued):]
		return nil
	})
	if err != nil {
		return nil, t.writeFailed(pgErr(pt.name, err))
	}
	if t.failing {
		t.store.log.Info("sessions: tape writes recovered", "tape", t.name)
		t.failing = false
	}
	if version != 0 {
		t.st, pt.version, pt.checked = st, version, time.Now()
	}
	return out, nil
}

// pgRefreshLocked fetches the tape's summary when it changed elsewhere.
// force skips the interval. t.mu must be held.
func (t *Tape) pgRefreshLocked(force bool) error {
	pt := t.pg
	if !force && time.Since(pt.checked) < pgRefreshInterval {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	if err := pt.s.ensureSchema(ctx); err != nil {
		return err
	}
	var version int64
	var raw []byte
	err := pt.s.pool.QueryRow(ctx, `SELECT version, summary FROM bub_tapes WHERE name = $1`, pt.name).Scan(&version, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		t.st, pt.version, pt.checked = state{}, 0, time.Now()
		return nil
	}
	if err != nil {
		return pgErr(pt.name, err)
	}
	pt.checked = time.Now()
	if version == pt.version {
		return nil
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return pgErr(pt.name, fmt.Errorf("summary: %w", err))
	}
	t.st, pt.version = st, version
	return nil
}

// pgResetLocked is reset for PostgreSQL: the tape's rows move to an
// archive tape named <name>.<stamp>.bak, or are deleted. t.mu must be
// held.
func (t *Tape) pgResetLocked(stamp string, mustArchive bool) (string, error) {
	pt := t.pg
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	if err := pt.s.ensureSchema(ctx); err != nil {
		return "", err
	}
	var archived string
	err := pgx.BeginFunc(ctx, pt.s.pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bub_tapes WHERE name = $1 FOR UPDATE)`, pt.name).Scan(&exists); err != nil {
			return err
		}
		if stamp == "" {
			if _, err := tx.Exec(ctx, `DELETE FROM bub_tape_lines WHERE tape = $1`, pt.name); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM bub_tapes WHERE name = $1`, pt.name)
			return err
		}
		if !exists && !mustArchive {
			return nil
		}
		for i := 1; i < 1000; i++ {
			name := pt.name + "." + stamp + ".bak"
			if i > 1 {
				name = pt.name + "." + stamp + "-" + strconv.Itoa(i) + ".bak"
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
			if _, err := tx.Exec(ctx, `UPDATE bub_tape_lines SET tape = $2 WHERE tape = $1`, pt.name, name); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE bub_tapes SET name = $2 WHERE name = $1`, pt.name, name); err != nil {
				return err
			}
			archived = "postgres:" + name
			return nil
		}
		return errors.New("too many archives with the same timestamp")
	})
	if err != nil {
		return "", pgErr(pt.name, err)
	}
	t.st, pt.version, pt.checked = state{}, 0, time.Time{}
	return archived, nil
}

// pgSource reads a tape's rows up to the position the reader's summary
// covers, a page at a time.
type pgSource struct {
	pool *pgxpool.Pool
	name string
	max  int64
}

func (s *pgSource) forward(from int64, fn func(pos, end int64, line []byte) bool) error {
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

func (s *pgSource) backward(fn func(pos, end int64, line []byte) bool) error {
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

type pgRow struct {
	seq  int64
	line string
}

func (s *pgSource) page(q string, at int64) ([]pgRow, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, q, s.name, at, s.max, pgPage)
	if err != nil {
		return nil, pgErr(s.name, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pgRow, error) {
		var row pgRow
		err := r.Scan(&row.seq, &row.line)
		return row, err
	})
	if err != nil {
		return nil, pgErr(s.name, err)
	}
	return out, nil
}
