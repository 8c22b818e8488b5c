// Package credstore keeps the per-principal token sets of auth = "oauth"
// upstreams in PostgreSQL (an upstream.CredentialStore), so replicas
// behind a load balancer share each principal's upstream sign-in, and the
// marks of used login links, so that a link is good once on all of them. It
// stores only what package upstream sealed (AES-GCM, bound to server and
// principal); no token is readable in the database. It lives beside
// sessions/pgstore so that package upstream links no database driver; its
// init registers it for [store] kind = "postgres".
package credstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bubbuild/bub-mcp/internal/pgschema"
	"github.com/bubbuild/bub-mcp/upstream"
)

func init() {
	upstream.RegisterCredentialStore("postgres", func(dsn string) (upstream.CredentialStore, error) { return Open(dsn) })
}

// timeout bounds one operation, so a database that stopped answering
// fails the call instead of hanging it.
const timeout = 5 * time.Second

// migrations are the schema versions, applied in order; a released step is
// never edited.
var migrations = []string{
	`CREATE TABLE bub_upstream_credentials (
		server    text NOT NULL,
		principal text NOT NULL,
		sealed    bytea NOT NULL,
		updated   timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (server, principal)
	 );`,
	`CREATE TABLE bub_upstream_login_nonces (
		nonce   text PRIMARY KEY,
		expires timestamptz NOT NULL
	 );
	 CREATE INDEX bub_upstream_login_nonces_expires ON bub_upstream_login_nonces (expires);`,
}

// Store is an upstream.CredentialStore on a PostgreSQL pool.
type Store struct {
	db *pgschema.DB
}

var _ upstream.CredentialStore = (*Store)(nil)
var _ upstream.CredentialLocker = (*Store)(nil)

// Open makes a pool on dsn. The schema is migrated on first use, so a
// server starts while its database is down.
func Open(dsn string) (*Store, error) {
	db, err := pgschema.Open(dsn, "upstream_credentials", migrations, timeout)
	if err != nil {
		return nil, fmt.Errorf("credstore: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.db.Close() }

// Get implements upstream.CredentialStore.
func (s *Store) Get(ctx context.Context, server, principal string) ([]byte, error) {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var sealed []byte
	err = s.db.Pool.QueryRow(ctx, `SELECT sealed FROM bub_upstream_credentials WHERE server = $1 AND principal = $2`, server, principal).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, upstream.ErrNoCredentials
	}
	if err != nil {
		return nil, fmt.Errorf("credstore: %w", err)
	}
	return sealed, nil
}

// Put implements upstream.CredentialStore.
func (s *Store) Put(ctx context.Context, server, principal string, sealed []byte) error {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = s.db.Pool.Exec(ctx, `INSERT INTO bub_upstream_credentials (server, principal, sealed) VALUES ($1, $2, $3)
		ON CONFLICT (server, principal) DO UPDATE SET sealed = EXCLUDED.sealed, updated = now()`, server, principal, sealed)
	if err != nil {
		return fmt.Errorf("credstore: %w", err)
	}
	return nil
}

// Delete implements upstream.CredentialStore.
func (s *Store) Delete(ctx context.Context, server, principal string) (bool, error) {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	tag, err := s.db.Pool.Exec(ctx, `DELETE FROM bub_upstream_credentials WHERE server = $1 AND principal = $2`, server, principal)
	if err != nil {
		return false, fmt.Errorf("credstore: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Principals implements upstream.CredentialStore.
func (s *Store) Principals(ctx context.Context, server string) ([]string, error) {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.db.Pool.Query(ctx, `SELECT principal FROM bub_upstream_credentials WHERE server = $1 ORDER BY principal`, server)
	if err != nil {
		return nil, fmt.Errorf("credstore: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("credstore: %w", err)
	}
	return out, nil
}

// Lock implements upstream.CredentialLocker with a session-level advisory
// lock on (server, principal), held on a connection of its own until
// unlock, so replicas refresh one principal's token one at a time.
func (s *Store) Lock(ctx context.Context, server, principal string) (func(), error) {
	conn, err := s.db.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("credstore: %w", err)
	}
	key := "bub_upstream_credentials\n" + server + "\n" + principal
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, key); err != nil {
		conn.Release()
		return nil, fmt.Errorf("credstore: lock: %w", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key); err != nil {
			// The lock is the session's: a connection that cannot say so
			// is closed, which lets go of it.
			conn.Conn().Close(ctx)
		}
		conn.Release()
	}, nil
}

// UseNonce implements upstream.CredentialStore: the primary key makes the
// insert of a nonce succeed once in the whole database; expired marks are
// purged first.
func (s *Store) UseNonce(ctx context.Context, nonce string, expires time.Time) (bool, error) {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	if _, err := s.db.Pool.Exec(ctx, `DELETE FROM bub_upstream_login_nonces WHERE expires < now()`); err != nil {
		return false, fmt.Errorf("credstore: %w", err)
	}
	tag, err := s.db.Pool.Exec(ctx, `INSERT INTO bub_upstream_login_nonces (nonce, expires)
		SELECT $1, $2 WHERE (SELECT count(*) FROM bub_upstream_login_nonces) < $3
		ON CONFLICT (nonce) DO NOTHING`, nonce, expires, upstream.MaxLoginsInFlight)
	if err != nil {
		return false, fmt.Errorf("credstore: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var used bool
	if err := s.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bub_upstream_login_nonces WHERE nonce = $1)`, nonce).Scan(&used); err != nil {
		return false, fmt.Errorf("credstore: %w", err)
	}
	if used {
		return false, nil
	}
	return false, upstream.ErrTooManyLogins
}
