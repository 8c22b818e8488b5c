// Package pgschema migrates the PostgreSQL tables of one bub-mcp component
// (sessions, audit): versioned, under an advisory lock, so replicas that
// start together migrate once.
package pgschema

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockKey is the advisory lock every component's migration takes: one
// migration at a time in the whole database.
const lockKey = 7242024001

// Migrate applies the migrations of component not applied yet, in order,
// in one transaction, and records the version in bub_schema. A database
// at a newer version than migrations knows is an error.
func Migrate(ctx context.Context, pool *pgxpool.Pool, component string, migrations []string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockKey)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS bub_schema (component text PRIMARY KEY, version int NOT NULL)`); err != nil {
			return err
		}
		var v int
		err := tx.QueryRow(ctx, `SELECT version FROM bub_schema WHERE component = $1`, component).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			v = 0
		} else if err != nil {
			return err
		}
		if v > len(migrations) {
			return fmt.Errorf("schema version %d is newer than this bub-mcp knows (%d)", v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.Exec(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO bub_schema (component, version) VALUES ($1, $2)
			ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version`, component, len(migrations))
		return err
	})
}

// DB is a pool on one database whose component's tables are migrated on
// first use, so a server starts while its database is down and recovers
// once it is back. The stores of sessions/pgstore's subpackages share it.
type DB struct {
	// Pool is the connection pool.
	Pool *pgxpool.Pool

	component  string
	migrations []string
	timeout    time.Duration

	mu       sync.Mutex
	migrated bool
}

// Open makes a pool on dsn for component, whose operations Ready bounds
// to timeout each. It does not connect.
func Open(dsn, component string, migrations []string, timeout time.Duration) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: postgres dsn: %w", component, err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", component, err)
	}
	return &DB{Pool: pool, component: component, migrations: migrations, timeout: timeout}, nil
}

// Ready bounds one operation to the DB's timeout and migrates the
// component's tables first if no operation has yet.
func (d *DB) Ready(ctx context.Context) (context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.migrated {
		if err := Migrate(ctx, d.Pool, d.component, d.migrations); err != nil {
			cancel()
			return nil, nil, fmt.Errorf("%s: schema: %w", d.component, err)
		}
		d.migrated = true
	}
	return ctx, cancel, nil
}

// Close closes the pool.
func (d *DB) Close() { d.Pool.Close() }
