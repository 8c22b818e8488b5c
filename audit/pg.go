package audit

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/internal/pgschema"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL audit log ([audit] store = "postgres") keeps one row per
// record in bub_audit, written by the same group commit as the file (one
// INSERT per batch), so replicas have one log. keep_days prunes it;
// max_file_bytes and keep_files are about files and do not apply.

// pgTimeout bounds one batch's insert, so a database that stopped
// answering fails the commit (the batch stays queued) rather than hanging
// it.
const pgTimeout = 10 * time.Second

// pgPruneEvery is how often keep_days is applied.
const pgPruneEvery = time.Hour

// pgMigrations are the audit log's schema versions, applied in order.
var pgMigrations = []string{
	`CREATE TABLE bub_audit (
		id     bigserial PRIMARY KEY,
		time   timestamptz NOT NULL,
		record jsonb NOT NULL
	 );
	 CREATE INDEX bub_audit_time ON bub_audit (time);`,
}

type pgSink struct {
	pool     *pgxpool.Pool
	keepDays int

	mu       sync.Mutex
	migrated bool
	pruned   time.Time
}

func openPGSink(dsn string, keepDays int) (*pgSink, error) {
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		return nil, fmt.Errorf("audit: postgres: %w", err)
	}
	return &pgSink{pool: pool, keepDays: keepDays}, nil
}

func (p *pgSink) ensureSchema(ctx context.Context) error {
	if p.migrated {
		return nil
	}
	err := pgschema.Migrate(ctx, p.pool, "audit", pgMigrations)
	if err != nil {
		return fmt.Errorf("audit: postgres schema: %w", err)
	}
	p.migrated = true
	return nil
}

// write inserts a batch of encoded records in one statement. The caller
// (commit) serialises calls.
func (p *pgSink) write(batch [][]byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ensureSchema(ctx); err != nil {
		return err
	}
	recs := make([]string, len(batch))
	for i, b := range batch {
		recs[i] = string(bytes.TrimSuffix(b, []byte("\n")))
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO bub_audit (time, record)
		SELECT (r::jsonb->>'time')::timestamptz, r::jsonb FROM unnest($1::text[]) AS u(r)`, recs); err != nil {
		return fmt.Errorf("audit: postgres: %w", err)
	}
	if p.keepDays > 0 && time.Since(p.pruned) >= pgPruneEvery {
		if _, err := p.pool.Exec(ctx, `DELETE FROM bub_audit WHERE time < now() - ($1 || ' days')::interval`, strconv.Itoa(p.keepDays)); err != nil {
			return fmt.Errorf("audit: postgres: prune: %w", err)
		}
		p.pruned = time.Now()
	}
	return nil
}

func (p *pgSink) close() { p.pool.Close() }
