package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/internal/pgschema"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgMigrations make the approvals table: one row per waiting call, its
// decision filled in once (the UPDATE's "decision IS NULL" makes the first
// decision the only one, as FileQueue's hard link does).
var pgMigrations = []string{
	`CREATE TABLE bub_approvals (
		id         text PRIMARY KEY,
		created    timestamptz NOT NULL,
		deadline   timestamptz NOT NULL,
		pending    json NOT NULL, -- json, not jsonb: the arguments as given
		decision   jsonb
	 );
	 CREATE INDEX bub_approvals_deadline ON bub_approvals (deadline);`,
}

// pgTimeout bounds each statement of the queue.
const pgTimeout = 10 * time.Second

// PGQueue is the approvals queue in PostgreSQL (the [store] database), so
// that a console on one machine decides calls held by replicas on others.
// Waiting servers poll their row every PollInterval.
type PGQueue struct {
	pool *pgxpool.Pool

	mu       sync.Mutex
	migrated bool
}

// NewPGQueue returns the queue in the database at dsn. It connects on
// first use (and makes its table then); Close releases the connections.
func NewPGQueue(dsn string) (*PGQueue, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("confirm: approvals queue: postgres dsn: %w", err)
	}
	if cfg.MaxConns > 4 {
		cfg.MaxConns = 4 // a queue of people's decisions needs few
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("confirm: approvals queue: postgres: %w", err)
	}
	return &PGQueue{pool: pool}, nil
}

// Close closes the queue's connections.
func (q *PGQueue) Close() error {
	q.pool.Close()
	return nil
}

func (q *PGQueue) ready(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.migrated {
		return nil
	}
	if err := pgschema.Migrate(ctx, q.pool, "approvals", pgMigrations); err != nil {
		return fmt.Errorf("confirm: approvals queue: postgres schema: %w", err)
	}
	q.migrated = true
	return nil
}

// exec runs one statement under pgTimeout after making sure of the table.
func (q *PGQueue) exec(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	if err := q.ready(ctx); err != nil {
		return err
	}
	if err := f(ctx); err != nil {
		if errors.Is(err, ErrNotPending) {
			return err
		}
		return fmt.Errorf("confirm: approvals queue: postgres: %w", err)
	}
	return nil
}

// Add inserts the call's row.
func (q *PGQueue) Add(ctx context.Context, p Pending) error {
	if !validID(p.ID) {
		return fmt.Errorf("confirm: bad approval id %q", p.ID)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return q.exec(ctx, func(ctx context.Context) error {
		_, err := q.pool.Exec(ctx, `INSERT INTO bub_approvals (id, created, deadline, pending) VALUES ($1, $2, $3, $4)`, p.ID, p.Created, p.Deadline, b)
		return err
	})
}

// Wait polls the call's row for a decision.
func (q *PGQueue) Wait(ctx context.Context, id string) (Decision, error) {
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		var raw []byte
		err := q.exec(ctx, func(ctx context.Context) error {
			return q.pool.QueryRow(ctx, `SELECT coalesce(decision::text, '') FROM bub_approvals WHERE id = $1`, id).Scan(&raw)
		})
		if err != nil && ctx.Err() == nil {
			return Decision{}, err
		}
		if err == nil && len(raw) > 0 {
			var d Decision
			if err := json.Unmarshal(raw, &d); err != nil {
				return Decision{}, fmt.Errorf("confirm: approvals queue: decision for %s: %w", id, err)
			}
			return d, nil
		}
		select {
		case <-ctx.Done():
			return Decision{}, ctx.Err()
		case <-t.C:
		}
	}
}

// Remove deletes the call's row, decision and all.
func (q *PGQueue) Remove(ctx context.Context, id string) error {
	return q.exec(ctx, func(ctx context.Context) error {
		_, err := q.pool.Exec(ctx, `DELETE FROM bub_approvals WHERE id = $1`, id)
		return err
	})
}

// List returns the undecided calls before their deadline, oldest first,
// and deletes the rows of servers that stopped waiting long ago.
func (q *PGQueue) List(ctx context.Context) ([]Pending, error) {
	now := time.Now()
	var out []Pending
	err := q.exec(ctx, func(ctx context.Context) error {
		if _, err := q.pool.Exec(ctx, `DELETE FROM bub_approvals WHERE deadline < $1`, now.Add(-staleAfter)); err != nil {
			return err
		}
		rows, err := q.pool.Query(ctx, `SELECT pending::text FROM bub_approvals WHERE decision IS NULL AND deadline > $1 ORDER BY created, id LIMIT 10000`, now)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var raw string
			if err := rows.Scan(&raw); err != nil {
				return err
			}
			var p Pending
			if json.Unmarshal([]byte(raw), &p) == nil {
				out = append(out, p)
			}
		}
		return rows.Err()
	})
	return out, err
}

// Decide fills in the decision of a row still undecided and before its
// deadline; PostgreSQL's row lock makes exactly one of several consoles
// deciding at once win.
func (q *PGQueue) Decide(ctx context.Context, id string, d Decision) error {
	if len(d.Reason) > maxReason {
		return fmt.Errorf("confirm: a reason is at most %d bytes", maxReason)
	}
	if d.At.IsZero() {
		d.At = time.Now().UTC()
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return q.exec(ctx, func(ctx context.Context) error {
		tag, err := q.pool.Exec(ctx, `UPDATE bub_approvals SET decision = $2 WHERE id = $1 AND decision IS NULL AND deadline > $3`, id, b, time.Now())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotPending
		}
		return nil
	})
}

// PostgresDSN is the [store] database's DSN when [store] kind = "postgres"
// ("" otherwise).
func PostgresDSN(a *app.App) string { return a.StoreDSN() }

var _ Queue = (*PGQueue)(nil)
