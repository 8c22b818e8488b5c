package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The audit log in PostgreSQL ([audit] store = "postgres"): the feed polls
// bub_audit (audit/pg.go) by id, and a call's Seq is its row id. Replicas
// insert concurrently, so a smaller id can become visible after a larger
// one; the ids skipped are looked for again for pgGapWait before they are
// given up (a rolled-back insert leaves a gap for good).

// pgGapWait is how long a skipped id is looked for.
const pgGapWait = 10 * time.Second

// pgBatch bounds the rows one poll reads.
const pgBatch = 1000

// pgQueryTimeout bounds one query of the audit table.
const pgQueryTimeout = 10 * time.Second

// errNoChainPG is the chain check's answer on the PostgreSQL log, whose
// records carry no hash chain.
var errNoChainPG = errors.New(`the audit log is in PostgreSQL ([audit] store = "postgres"), whose records are not hash-chained: rely on the database's own access control`)

// pgTail is the feed's PostgreSQL side; touched by the poll goroutine
// only (and by start before it).
type pgTail struct {
	pool *pgxpool.Pool
	last int64               // the largest id seen
	gaps map[int64]time.Time // skipped ids, with when they were skipped
}

// pgRows runs q (selecting id, record) and calls fn for each decoded call.
func pgRows(ctx context.Context, pool *pgxpool.Pool, fn func(Call) bool, q string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	rows, err := pool.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("console: audit table: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var rec []byte
		if err := rows.Scan(&id, &rec); err != nil {
			return fmt.Errorf("console: audit table: %w", err)
		}
		c, ok := parseCall(rec)
		if !ok {
			continue
		}
		c.Seq = id
		if !fn(c) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("console: audit table: %w", err)
	}
	return nil
}

// pgHistory loads the newest max calls, oldest first.
func (fd *feed) pgHistory() []Call {
	var out []Call
	err := pgRows(context.Background(), fd.pg.pool, func(c Call) bool {
		out = append(out, c)
		return true
	}, `SELECT id, record::text FROM bub_audit ORDER BY id DESC LIMIT $1`, fd.max)
	if err != nil {
		fd.log.Warn("console: audit history", "error", err)
	}
	slices.Reverse(out)
	if len(out) > 0 {
		fd.pg.last = out[len(out)-1].Seq
	}
	return out
}

// pgTick reads the rows past the last id, and the skipped ids still
// looked for.
func (fd *feed) pgTick() {
	now := time.Now()
	gaps := make([]int64, 0, len(fd.pg.gaps))
	for id, at := range fd.pg.gaps {
		if now.Sub(at) > pgGapWait {
			delete(fd.pg.gaps, id)
			continue
		}
		gaps = append(gaps, id)
	}
	var got []Call
	err := pgRows(context.Background(), fd.pg.pool, func(c Call) bool {
		got = append(got, c)
		return true
	}, `SELECT id, record::text FROM bub_audit WHERE id > $1 OR id = ANY($2) ORDER BY id LIMIT $3`, fd.pg.last, gaps, pgBatch)
	if err != nil {
		fd.log.Warn("console: audit poll", "error", err)
		return
	}
	for _, c := range got {
		if _, late := fd.pg.gaps[c.Seq]; late {
			delete(fd.pg.gaps, c.Seq)
		} else if c.Seq > fd.pg.last {
			for id := fd.pg.last + 1; id < c.Seq && fd.pg.last > 0 && len(fd.pg.gaps) < 10000; id++ {
				fd.pg.gaps[id] = now
			}
			fd.pg.last = c.Seq
		}
		fd.add(c)
	}
}

// pgScan calls fn for every call at or after since, oldest first, until
// fn returns false.
func pgScan(pool *pgxpool.Pool, since time.Time, fn func(Call) bool) error {
	return pgRows(context.Background(), pool, fn, `SELECT id, record::text FROM bub_audit WHERE time >= $1 ORDER BY id`, since)
}
