package ratestore_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
// burst; a refused take says when a token is back, and it is then.
func TestSharedBucket(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := context.Background()
	slow := ratelimit.Rate{PerMinute: 0.01, Burst: 4} // no refill within the test
	var allowed []bool
	for _, l := range []*ratestore.Limiter{a, b, a, b, a} {
		d, err := l.Take(ctx, "rule#alice", slow)
		if err != nil {
			t.Fatal(err)
		}
		allowed = append(allowed, d.Allowed)
	}
	if diff := cmp.Diff([]bool{true, true, true, true, false}, allowed); diff != "" {
		t.Errorf("a burst of 5 over two replicas, burst 4 (-want +got):\n%s", diff)
	}
	// Another key has its own bucket.
	if d, err := a.Take(ctx, "rule#bob", slow); err != nil || !d.Allowed || d.Remaining != 3 {
		t.Errorf("bob's first take: %+v, %v; want allowed with 3 left", d, err)
	}
	// A fast bucket: empty it, then wait as told.
	fast := ratelimit.Rate{PerMinute: 600, Burst: 2} // a token per 100 ms
	var d ratelimit.Decision
	for range 50 {
		var err error
		if d, err = a.Take(ctx, "rule#carol", fast); err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			break
		}
	}
	if d.Allowed {
		t.Fatal("50 takes at burst 2 were all allowed")
	}
	if d.RetryAfter <= 0 || d.RetryAfter > 100*time.Millisecond {
		t.Errorf("retry after %v; want within a token's 100 ms", d.RetryAfter)
	}
	time.Sleep(d.RetryAfter + 20*time.Millisecond)
	if d, err := b.Take(ctx, "rule#carol", fast); err != nil || !d.Allowed {
		t.Errorf("after the wait, on the other replica: %+v, %v; want allowed", d, err)
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
