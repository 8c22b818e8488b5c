// Package ratestore keeps the token buckets of `[[limits]]` in PostgreSQL
// (a ratelimit.Limiter), so replicas behind a load balancer share each
// principal's limits: a burst spread over three replicas is one burst.
// It lives beside sessions/pgstore so that package auth/ratelimit links
// no database driver.
package ratestore

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bubbuild/bub-mcp/auth/ratelimit"
	"github.com/bubbuild/bub-mcp/internal/pgschema"
)

// timeout bounds one Take, so a database that stopped answering fails the
// check (the caller decides what that means) instead of hanging requests.
const timeout = 5 * time.Second

// idleAfter is how long a bucket may go untouched before a purge drops
// it: past a day, any bucket has refilled and equals a new one.
const idleAfter = 24 * time.Hour

// migrations are the schema versions, applied in order; a released step is
// never edited.
var migrations = []string{
	`CREATE TABLE bub_rate_buckets (
		key    bytea PRIMARY KEY, -- ratelimit's keys join their parts with NUL
		tokens double precision NOT NULL,
		at     timestamptz NOT NULL
	 );
	 CREATE INDEX bub_rate_buckets_at ON bub_rate_buckets (at);`,
}

// Limiter is a ratelimit.Limiter on a PostgreSQL pool. The database's
// clock is the only one used, so replicas whose clocks differ agree.
type Limiter struct {
	db    *pgschema.DB
	takes atomic.Int64
}

var _ ratelimit.Limiter = (*Limiter)(nil)

// Open makes a pool on dsn. The schema is migrated on first use, so a
// server starts while its database is down.
func Open(dsn string) (*Limiter, error) {
	db, err := pgschema.Open(dsn, "ratelimit", migrations, timeout)
	if err != nil {
		return nil, fmt.Errorf("ratestore: %w", err)
	}
	return &Limiter{db: db}, nil
}

// Close closes the pool.
func (l *Limiter) Close() { l.db.Close() }

// Take implements ratelimit.Limiter: in one transaction, the bucket is
// refilled for the time since it was last touched (by any replica) and a
// token taken if one is there; the row lock makes concurrent takes on one
// key queue up. Every thousandth take also purges idle buckets.
func (l *Limiter) Take(ctx context.Context, key string, rate ratelimit.Rate) (ratelimit.Decision, error) {
	ctx, cancel, err := l.db.Ready(ctx)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	defer cancel()
	purge := l.takes.Add(1)%1000 == 0
	burst := float64(rate.BurstSize())
	perSec := rate.PerMinute / 60
	var d ratelimit.Decision
	err = pgx.BeginFunc(ctx, l.db.Pool, func(tx pgx.Tx) error {
		var tokens float64
		err := tx.QueryRow(ctx, `INSERT INTO bub_rate_buckets AS b (key, tokens, at) VALUES ($1, $2, clock_timestamp())
			ON CONFLICT (key) DO UPDATE SET
				tokens = LEAST($2, b.tokens + GREATEST(0, EXTRACT(EPOCH FROM clock_timestamp() - b.at)) * $3),
				at = clock_timestamp()
			RETURNING tokens`, []byte(key), burst, perSec).Scan(&tokens)
		if err != nil {
			return err
		}
		if tokens >= 1-epsilon {
			tokens = math.Max(0, tokens-1)
			d = ratelimit.Decision{Allowed: true, Remaining: int(tokens + epsilon)}
			_, err = tx.Exec(ctx, `UPDATE bub_rate_buckets SET tokens = $2 WHERE key = $1`, []byte(key), tokens)
			return err
		}
		d = ratelimit.Decision{RetryAfter: time.Duration(math.Round((1-tokens)/perSec*1000)) * time.Millisecond}
		return nil
	})
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("ratestore: %w", err)
	}
	if purge {
		if _, err := l.db.Pool.Exec(ctx, `DELETE FROM bub_rate_buckets WHERE at < clock_timestamp() - make_interval(secs => $1)`, idleAfter.Seconds()); err != nil {
			return d, fmt.Errorf("ratestore: purging: %w", err)
		}
	}
	return d, nil
}

// epsilon absorbs float rounding in refills (a millionth of a token), as
// ratelimit's memory buckets do.
const epsilon = 1e-6
