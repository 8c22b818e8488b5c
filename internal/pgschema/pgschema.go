// Package pgschema migrates the PostgreSQL tables of one bub-mcp component
// (sessions, audit): versioned, under an advisory lock, so replicas that
// start together migrate once.
package pgschema

import (
	"context"
	"errors"
	"fmt"

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
