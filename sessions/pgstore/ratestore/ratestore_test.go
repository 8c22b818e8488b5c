package ratestore_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/auth/ratelimit"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/sessions/pgstore/ratestore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// open is a Limiter on dsn, closed with the test: each is one replica.
func open(t *testing.T, dsn string) *ratestore.Limiter {
	t.Helper()
	l, err := ratestore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// Two replicas share one bucket per key: a burst spread over both is one
// burst, a refused take says when a token is back, and it is.
func TestSharedBucket(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := context.Background()
	rate := ratelimit.Rate{PerMinute: 600, Burst: 4} // a token per 100 ms
	var allowed int
	for i, l := range []*ratestore.Limiter{a, b, a, b, a} {
		d, err := l.Take(ctx, "rule#alice", rate)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
			continue
		}
		if i != 4 {
			t.Fatalf("take %d refused; want the first 4 allowed", i)
		}
		if d.RetryAfter <= 0 || d.RetryAfter > 100*time.Millisecond {
			t.Errorf("retry after %v; want within a token's 100 ms", d.RetryAfter)
		}
		time.Sleep(d.RetryAfter + 20*time.Millisecond)
		if d, err := b.Take(ctx, "rule#alice", rate); err != nil || !d.Allowed {
			t.Errorf("after the wait: %+v, %v; want allowed", d, err)
		}
	}
	if allowed != 4 {
		t.Errorf("%d of 5 allowed; want the burst, 4", allowed)
	}
	// Another key has its own bucket.
	if d, err := a.Take(ctx, "rule#bob", rate); err != nil || !d.Allowed || d.Remaining != 3 {
		t.Errorf("bob's first take: %+v, %v; want allowed with 3 left", d, err)
	}
}

// Takes racing on one key from three replicas let exactly the burst
// through: the row lock makes refill-and-take atomic.
func TestConcurrentTakes(t *testing.T) {
	dsn := pgtest.DSN(t)
	ls := []*ratestore.Limiter{open(t, dsn), open(t, dsn), open(t, dsn)}
	rate := ratelimit.Rate{PerMinute: 0.001, Burst: 10} // no refill within the test
	var allowed, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := ls[i%len(ls)].Take(context.Background(), "k", rate)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				allowed.Add(1)
			} else {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 10 || refused.Load() != 50 {
		t.Errorf("%d allowed, %d refused; want 10 and 50", allowed.Load(), refused.Load())
	}
}

// Limits over the shared store answer as over memory buckets: the rule's
// name and the wait in whole seconds.
func TestLimitsOverStore(t *testing.T) {
	l := open(t, pgtest.DSN(t))
	lim, err := ratelimit.New(ratelimit.Options{Limiter: l, Rules: []ratelimit.Rule{{Name: "slow", Tool: "fs.*", PerMinute: 1, Burst: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	s := ratelimit.Subject{Principal: "iss#alice", Profile: "default", Tool: "fs.read"}
	if d, err := lim.Check(context.Background(), s); err != nil || !d.Allowed {
		t.Fatalf("first call: %+v, %v", d, err)
	}
	d, err := lim.Check(context.Background(), s)
	if err != nil || d.Allowed || d.Rule != "slow" || d.RetryAfterSeconds() < 59 || d.RetryAfterSeconds() > 60 {
		t.Errorf("second call: %+v, %v; want refused by slow, retry in ~60 s", d, err)
	}
}
