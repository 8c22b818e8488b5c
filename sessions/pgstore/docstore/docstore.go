// Package docstore keeps small JSON documents in PostgreSQL, each changed
// under a lock that every process on the database honours: what a feature
// keeps per name and must share between replicas and the commands an
// operator runs (an upstream server's pinned tool definitions). It lives
// beside sessions/pgstore so that the features link no database driver of
// their own.
package docstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bubbuild/bub-mcp/internal/pgschema"
)

// timeout bounds one operation, so a database that stopped answering fails
// it instead of hanging its caller.
const timeout = 10 * time.Second

// MaxBytes bounds one document.
const MaxBytes = 64 << 20

// migrations are the schema versions, applied in order; a released step is
// never edited.
var migrations = []string{
	`CREATE TABLE bub_documents (
		kind    text NOT NULL,
		key     text NOT NULL,
		data    bytea NOT NULL,
		version bigint NOT NULL,
		PRIMARY KEY (kind, key)
	 );`,
}

// Store is the documents on one pool.
type Store struct {
	db *pgschema.DB
}

// Open makes a pool on dsn. The schema is migrated on first use, so a
// server starts while its database is down.
func Open(dsn string) (*Store, error) {
	db, err := pgschema.Open(dsn, "documents", migrations, timeout)
	if err != nil {
		return nil, fmt.Errorf("docstore: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.db.Close() }

// Load returns a document, nil when there is none.
func (s *Store) Load(ctx context.Context, kind, key string) ([]byte, error) {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var data []byte
	err = s.db.Pool.QueryRow(ctx, `SELECT data FROM bub_documents WHERE kind = $1 AND key = $2`, kind, key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("docstore: %w", err)
	}
	return data, nil
}

// Update runs fn on the document (nil when there is none) with every
// other Update of it, in any process, kept out; when fn reports a change,
// what it returns is stored and the document's Stamp changes.
func (s *Store) Update(ctx context.Context, kind, key string, fn func(old []byte) (data []byte, changed bool, err error)) error {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	err = pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		// A document that does not exist yet has no row to lock: the
		// transaction's advisory lock on its name serves both cases.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, kind+"\x1f"+key); err != nil {
			return err
		}
		var old []byte
		err := tx.QueryRow(ctx, `SELECT data FROM bub_documents WHERE kind = $1 AND key = $2`, kind, key).Scan(&old)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		data, changed, err := fn(old)
		if err != nil || !changed {
			return err
		}
		if len(data) > MaxBytes {
			return fmt.Errorf("%s %s: %d bytes, over the %d-byte bound", kind, key, len(data), MaxBytes)
		}
		_, err = tx.Exec(ctx, `INSERT INTO bub_documents (kind, key, data, version) VALUES ($1, $2, $3, 1)
			ON CONFLICT (kind, key) DO UPDATE SET data = EXCLUDED.data, version = bub_documents.version + 1`, kind, key, data)
		return err
	})
	if err != nil {
		return fmt.Errorf("docstore: %w", err)
	}
	return nil
}

// Stamp is a value that changes whenever the document is stored; "" when
// there is none. Pollers compare it instead of reading the document.
func (s *Store) Stamp(ctx context.Context, kind, key string) (string, error) {
	ctx, cancel, err := s.db.Ready(ctx)
	if err != nil {
		return "", err
	}
	defer cancel()
	var v int64
	err = s.db.Pool.QueryRow(ctx, `SELECT version FROM bub_documents WHERE kind = $1 AND key = $2`, kind, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("docstore: %w", err)
	}
	return strconv.FormatInt(v, 10), nil
}
