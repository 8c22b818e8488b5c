package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/ratelimit"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLimits(t *testing.T, clk *clock, rules ...ratelimit.Rule) *ratelimit.Limits {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Options{Rules: rules, Limiter: ratelimit.NewMemory(&ratelimit.MemoryOptions{Now: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type step struct {
	advance time.Duration
	allowed bool
	wait    time.Duration
}

// TestBurst: a burst over the limit is refused with the right wait, and
// calls pass again once the bucket has refilled (a fake clock, no sleeps).
func TestBurst(t *testing.T) {
	alice := ratelimit.Subject{Principal: "https://idp#alice", Name: "alice@example.com", Profile: "dev", Tool: "bash"}
	tests := []struct {
		name  string
		rule  ratelimit.Rule
		steps []step
	}{
		{"6 per minute, burst 3", ratelimit.Rule{Tool: "bash", PerMinute: 6, Burst: 3}, []step{
			{0, true, 0}, {0, true, 0}, {0, true, 0},
			{0, false, 10 * time.Second},
			{4 * time.Second, false, 6 * time.Second},
			{6 * time.Second, true, 0},
			{0, false, 10 * time.Second},
		}},
		{"2 per minute, default burst", ratelimit.Rule{Tool: "*", PerMinute: 2}, []step{
			{0, true, 0}, {0, true, 0},
			{0, false, 30 * time.Second},
			{30 * time.Second, true, 0},
			{0, false, 30 * time.Second},
			{time.Hour, true, 0}, {0, true, 0},
			{0, false, 30 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1_900_000_000, 0)}
			l := newLimits(t, clk, tt.rule)
			for i, s := range tt.steps {
				clk.Advance(s.advance)
				d, err := l.Check(t.Context(), alice)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed != s.allowed || (!s.allowed && d.RetryAfter != s.wait) {
					t.Errorf("step %d: allowed=%v retry=%v; want %v %v", i, d.Allowed, d.RetryAfter, s.allowed, s.wait)
				}
				if !d.Allowed {
					want := fmt.Sprintf("limit limits[0]: retry in %d s", int(s.wait.Seconds()))
					if d.Message() != want || d.RetryAfterSeconds() != int(s.wait.Seconds()) {
						t.Errorf("step %d: message %q (%d s); want %q", i, d.Message(), d.RetryAfterSeconds(), want)
					}
				}
			}
		})
	}
}

// TestMatching: rules apply by principal (ID or name glob), profile and
// tool glob; request-level rules (no tool) and tool rules are separate;
// each principal has its own bucket.
func TestMatching(t *testing.T) {
	clk := &clock{t: time.Unix(1_900_000_000, 0)}
	l := newLimits(t, clk,
		ratelimit.Rule{Name: "fs", Tool: "fs.*", Profile: "dev", PerMinute: 1},
		ratelimit.Rule{Name: "example", Principal: "*@example.com", PerMinute: 1},
		ratelimit.Rule{Name: "idp", Principal: "https://idp#carol", Tool: "*", PerMinute: 1},
	)
	alice := ratelimit.Subject{Principal: "https://idp#alice", Name: "alice@example.com", Profile: "dev"}
	bob := ratelimit.Subject{Principal: "https://idp#bob", Name: "bob@example.com", Profile: "ops"}
	carol := ratelimit.Subject{Principal: "https://idp#carol", Name: "carol", Profile: "ops"}
	with := func(s ratelimit.Subject, tool string) ratelimit.Subject { s.Tool = tool; return s }
	calls := []struct {
		s    ratelimit.Subject
		want string // "" allowed, else the refusing rule
	}{
		{with(alice, "fs.read"), ""},
		{with(alice, "fs.write"), "fs"},
		{with(alice, "bash"), ""},
		{with(bob, "fs.read"), ""}, // profile ops: the fs rule does not apply
		{with(bob, "fs.read"), ""},
		{alice, ""},
		{alice, "example"},
		{bob, ""}, // own bucket
		{bob, "example"},
		{carol, ""}, // no request-level rule for carol
		{carol, ""},
		{with(carol, "bash"), ""},
		{with(carol, "fs.read"), "idp"},
	}
	for i, c := range calls {
		d, err := l.Check(t.Context(), c.s)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Rule; d.Allowed != (c.want == "") || got != c.want {
			t.Errorf("call %d %+v: allowed=%v rule=%q; want rule %q", i, c.s, d.Allowed, got, c.want)
		}
	}
}

// TestMemoryBounded: the bucket map never exceeds MaxKeys; idle (refilled)
// buckets go first, so a principal that is being limited keeps its state
// even when it is the least recently used.
func TestMemoryBounded(t *testing.T) {
	clk := &clock{t: time.Unix(1_900_000_000, 0)}
	m := ratelimit.NewMemory(&ratelimit.MemoryOptions{MaxKeys: 50, Now: clk.Now})
	slow := ratelimit.Rate{PerMinute: 1, Burst: 1}
	fast := ratelimit.Rate{PerMinute: 60, Burst: 1}
	ctx := context.Background()
	if d, _ := m.Take(ctx, "hot", slow); !d.Allowed {
		t.Fatal("first take refused")
	}
	for i := range 1000 {
		if i%40 == 0 {
			clk.Advance(2 * time.Second) // the fast buckets refill: idle
		}
		if _, err := m.Take(ctx, fmt.Sprint("k", i), fast); err != nil {
			t.Fatal(err)
		}
		if n := m.Len(); n > 50 {
			t.Fatalf("after %d keys: %d buckets; want at most 50", i, n)
		}
	}
	// 50 s later "hot" has not refilled: still refused, not forgotten.
	if d, _ := m.Take(ctx, "hot", slow); d.Allowed || d.RetryAfter != 10*time.Second {
		t.Errorf("hot: allowed=%v retry=%v; want refused, 10s (evicted while in use?)", d.Allowed, d.RetryAfter)
	}
}

// TestConcurrent: parallel takes on one bucket allow exactly the burst.
func TestConcurrent(t *testing.T) {
	clk := &clock{t: time.Unix(1_900_000_000, 0)}
	m := ratelimit.NewMemory(&ratelimit.MemoryOptions{Now: clk.Now})
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 64 {
		wg.Go(func() {
			d, _ := m.Take(context.Background(), "k", ratelimit.Rate{PerMinute: 1, Burst: 10})
			if d.Allowed {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if allowed != 10 {
		t.Errorf("allowed %d of 64; want the burst, 10", allowed)
	}
}

// TestMiddleware: over a principal's request-level limit the HTTP answer is
// 429 with Retry-After.
func TestMiddleware(t *testing.T) {
	clk := &clock{t: time.Unix(1_900_000_000, 0)}
	l := newLimits(t, clk, ratelimit.Rule{Name: "per-user", PerMinute: 2, Burst: 1})
	p := &auth.Principal{Issuer: "https://idp", Subject: "alice", Name: "alice"}
	h := l.Middleware(func(*http.Request) ratelimit.Subject { return ratelimit.Subject{Principal: p.ID(), Name: p.Name} },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	type got struct {
		Status     int
		RetryAfter string
		Body       string
	}
	do := func() got {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		h.ServeHTTP(rec, req)
		return got{rec.Code, rec.Header().Get("Retry-After"), rec.Body.String()}
	}
	steps := []struct {
		advance time.Duration
		want    got
	}{
		{0, got{204, "", ""}},
		{0, got{429, "30", `{"error":"rate_limited","error_description":"limit per-user: retry in 30 s"}` + "\n"}},
		{20 * time.Second, got{429, "10", `{"error":"rate_limited","error_description":"limit per-user: retry in 10 s"}` + "\n"}},
		{10 * time.Second, got{204, "", ""}},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		if d := cmp.Diff(s.want, do()); d != "" {
			t.Errorf("step %d (-want +got):\n%s", i, d)
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		rule ratelimit.Rule
		want string
	}{
		{ratelimit.Rule{}, "ratelimit: limits[0]: per_minute must be a positive number"},
		{ratelimit.Rule{PerMinute: 1, Burst: -1}, "ratelimit: limits[0]: burst must not be negative"},
		{ratelimit.Rule{PerMinute: 1, Tool: "[a"}, `ratelimit: limits[0]: tool "[a": syntax error in pattern`},
	}
	for _, tt := range tests {
		_, err := ratelimit.New(ratelimit.Options{Rules: []ratelimit.Rule{tt.rule}})
		if err == nil || err.Error() != tt.want {
			t.Errorf("New(%+v) = %v; want %q", tt.rule, err, tt.want)
		}
	}
}

func ExampleLimits_Check() {
	l, _ := ratelimit.New(ratelimit.Options{Rules: []ratelimit.Rule{{Name: "bash", Tool: "bash", PerMinute: 6, Burst: 1}}})
	s := ratelimit.Subject{Principal: "https://idp#alice", Tool: "bash"}
	for range 2 {
		d, _ := l.Check(context.Background(), s)
		fmt.Printf("%v %q\n", d.Allowed, d.Rule)
	}
	// Output:
	// true ""
	// false "bash"
}
