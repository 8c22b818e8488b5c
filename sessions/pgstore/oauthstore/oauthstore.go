// Package oauthstore keeps the OAuth authorization-server front's state
// (asfront.Store: clients, pending sign-ins, consents, codes, refresh
// tokens) and its signing keys (auth.KeyStore) in PostgreSQL, so replicas
// behind a load balancer share them: a sign-in on one replica, the token
// and refreshes on others. It lives beside sessions/pgstore so that
// package auth links no database driver.
package oauthstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/asfront"
	"github.com/bubbuild/bub-mcp/internal/pgschema"
)

// timeout bounds one operation, so a database that stopped answering fails
// requests instead of hanging them.
const timeout = 10 * time.Second

// purgeAfter is how long an expired record is kept (see asfront.Store).
const purgeAfter = time.Hour

// migrations are the schema versions, applied in order; a released step is
// never edited.
var migrations = []string{
	`CREATE TABLE bub_oauth_records (
		kind    text NOT NULL,
		key     text NOT NULL,
		data    bytea NOT NULL,
		family  text NOT NULL DEFAULT '',
		expires timestamptz,
		used    boolean NOT NULL DEFAULT false,
		revoked boolean NOT NULL DEFAULT false,
		PRIMARY KEY (kind, key)
	 );
	 CREATE INDEX bub_oauth_records_family ON bub_oauth_records (family) WHERE family <> '';
	 CREATE INDEX bub_oauth_records_expires ON bub_oauth_records (expires);
	 CREATE TABLE bub_oauth_keys (id int PRIMARY KEY, ring bytea NOT NULL);`,
}

// Store is an asfront.Store and an auth.KeyStore on one pool.
type Store struct {
	db     *pgschema.DB
	writes atomic.Int64
}

// Open makes a pool on dsn. The schema is migrated on first use, so a
// server starts while its database is down.
func Open(dsn string) (*Store, error) {
	db, err := pgschema.Open(dsn, "oauth", migrations, timeout)
	if err != nil {
		return nil, fmt.Errorf("oauthstore: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.db.Close() }

func expiresArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// Create implements asfront.Store. Every hundredth write also deletes
// records expired for longer than an hour.
func (s *Store) Create(ctx context.Context, kind asfront.Kind, key string, r asfront.Record) error {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tag, err := s.db.Pool.Exec(ctx, `INSERT INTO bub_oauth_records (kind, key, data, family, expires, used, revoked)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		string(kind), key, []byte(r.Data), r.Family, expiresArg(r.Expires), r.Used, r.Revoked)
	if err != nil {
		return fmt.Errorf("oauthstore: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return asfront.ErrExists
	}
	if s.writes.Add(1)%100 == 0 {
		if _, err := s.db.Pool.Exec(ctx, `DELETE FROM bub_oauth_records WHERE expires < $1`, time.Now().Add(-purgeAfter)); err != nil {
			return fmt.Errorf("oauthstore: purging: %w", err)
		}
	}
	return nil
}

func scan(row pgx.Row) (asfront.Record, error) {
	var r asfront.Record
	var data []byte
	var exp *time.Time
	err := row.Scan(&data, &r.Family, &exp, &r.Used, &r.Revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, asfront.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("oauthstore: %w", err)
	}
	r.Data = data
	if exp != nil {
		r.Expires = *exp
	}
	return r, nil
}

// Get implements asfront.Store.
func (s *Store) Get(ctx context.Context, kind asfront.Kind, key string) (asfront.Record, error) {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return asfront.Record{}, err
	}
	defer cancel()
	return scan(s.db.Pool.QueryRow(ctx, `SELECT data, family, expires, used, revoked FROM bub_oauth_records WHERE kind = $1 AND key = $2`, string(kind), key))
}

// Use implements asfront.Store: one statement that locks the row, so of
// two replicas using a code at once exactly one sees it unused.
func (s *Store) Use(ctx context.Context, kind asfront.Kind, key string) (asfront.Record, error) {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return asfront.Record{}, err
	}
	defer cancel()
	return scan(s.db.Pool.QueryRow(ctx, `UPDATE bub_oauth_records r SET used = true
		FROM (SELECT kind, key, used FROM bub_oauth_records WHERE kind = $1 AND key = $2 FOR UPDATE) old
		WHERE r.kind = old.kind AND r.key = old.key
		RETURNING r.data, r.family, r.expires, old.used, r.revoked`, string(kind), key))
}

// RevokeFamily implements asfront.Store.
func (s *Store) RevokeFamily(ctx context.Context, family string) error {
	if family == "" {
		return nil
	}
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := s.db.Pool.Exec(ctx, `UPDATE bub_oauth_records SET revoked = true WHERE family = $1`, family); err != nil {
		return fmt.Errorf("oauthstore: %w", err)
	}
	return nil
}

// Count implements asfront.Store.
func (s *Store) Count(ctx context.Context, kind asfront.Kind) (int, error) {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	var n int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM bub_oauth_records WHERE kind = $1 AND (expires IS NULL OR expires > now())`, string(kind)).Scan(&n); err != nil {
		return 0, fmt.Errorf("oauthstore: %w", err)
	}
	return n, nil
}

// Keys returns the auth.KeyStore of the front's signing keys in this
// database.
func (s *Store) Keys() auth.KeyStore { return keyStore{s} }

type keyStore struct{ s *Store }

// Load implements auth.KeyStore.
func (k keyStore) Load(ctx context.Context) ([]byte, error) {
	ctx, cancel, err := k.s.db.Ready(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var blob []byte
	err = k.s.db.Pool.QueryRow(ctx, `SELECT ring FROM bub_oauth_keys WHERE id = 1`).Scan(&blob)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, fmt.Errorf("oauthstore: %w", err)
	}
	return blob, nil
}

// Update implements auth.KeyStore in one transaction that holds the ring's
// row locked across the read, fn and the write, so replicas rotating at
// once run one after the other. With no ring yet the row is inserted first,
// to have something to lock: a replica inserting at the same time waits for
// this transaction and then reads its ring.
func (k keyStore) Update(ctx context.Context, fn func(old []byte) ([]byte, error)) error {
	ctx, cancel, err := k.s.db.Ready(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var fnErr error
	err = pgx.BeginFunc(ctx, k.s.db.Pool, func(tx pgx.Tx) error {
		var old []byte
		err := tx.QueryRow(ctx, `INSERT INTO bub_oauth_keys (id, ring) VALUES (1, '') ON CONFLICT (id) DO NOTHING RETURNING id`).Scan(new(int))
		if errors.Is(err, pgx.ErrNoRows) { // the row exists: lock it and read it
			err = tx.QueryRow(ctx, `SELECT ring FROM bub_oauth_keys WHERE id = 1 FOR UPDATE`).Scan(&old)
		}
		if err != nil {
			return err
		}
		blob, err := fn(old)
		if err != nil {
			fnErr = err
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE bub_oauth_keys SET ring = $1 WHERE id = 1`, blob)
		return err
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("oauthstore: %w", err)
	}
	return nil
}

var (
	_ asfront.Store = (*Store)(nil)
	_ auth.KeyStore = keyStore{}
)
