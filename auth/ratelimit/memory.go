package ratelimit

import (
	"container/list"
	"context"
	"math"
	"sync"
	"time"
)

// DefaultMaxKeys bounds a Memory limiter's buckets when MemoryOptions says 0.
const DefaultMaxKeys = 10000

// MemoryOptions configure NewMemory; nil means the defaults.
type MemoryOptions struct {
	// MaxKeys bounds the number of buckets kept; 0 means DefaultMaxKeys.
	// Past it, idle buckets (refilled to full, so equal to a new one) are
	// dropped first, then the least recently used.
	MaxKeys int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Memory is a Limiter of token buckets in this process's memory: per
// replica. Safe for concurrent use.
type Memory struct {
	max int
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*list.Element // of *bucket, most recent at the front
	lru     *list.List
}

// epsilon absorbs float rounding in refills (a millionth of a token).
const epsilon = 1e-6

type bucket struct {
	key    string
	tokens float64
	last   time.Time
	rate   Rate
}

// NewMemory returns an in-memory Limiter.
func NewMemory(opts *MemoryOptions) *Memory {
	var o MemoryOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Memory{max: o.MaxKeys, now: o.Now, buckets: map[string]*list.Element{}, lru: list.New()}
}

// Take takes one token from key's bucket.
func (m *Memory) Take(_ context.Context, key string, rate Rate) (Decision, error) {
	now := m.now()
	perSec := rate.PerMinute / 60
	burst := float64(rate.BurstSize())
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.buckets[key]
	if !ok {
		if len(m.buckets) >= m.max {
			m.evict(now)
		}
		e = m.lru.PushFront(&bucket{key: key, tokens: burst, last: now, rate: rate})
		m.buckets[key] = e
	} else {
		m.lru.MoveToFront(e)
	}
	b := e.Value.(*bucket)
	b.rate = rate
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = math.Min(burst, b.tokens+elapsed.Seconds()*perSec)
	}
	b.last = now
	// Waits are whole milliseconds and the comparison allows for float
	// rounding, so a retry exactly RetryAfter later is allowed.
	if b.tokens >= 1-epsilon {
		b.tokens = math.Max(0, b.tokens-1)
		return Decision{Allowed: true, Remaining: int(b.tokens + epsilon)}, nil
	}
	wait := time.Duration(math.Round((1-b.tokens)/perSec*1000)) * time.Millisecond
	return Decision{RetryAfter: max(wait, time.Millisecond)}, nil
}

// evict makes room for one bucket: it drops every bucket that has refilled
// to full (idle: forgetting it changes nothing), oldest first, and if none
// has, the least recently used one.
func (m *Memory) evict(now time.Time) {
	dropped := false
	for e := m.lru.Back(); e != nil; {
		prev := e.Prev()
		b := e.Value.(*bucket)
		full := b.tokens+now.Sub(b.last).Seconds()*b.rate.PerMinute/60 >= float64(b.rate.BurstSize())
		if full {
			m.lru.Remove(e)
			delete(m.buckets, b.key)
			dropped = true
		}
		e = prev
	}
	if !dropped {
		if e := m.lru.Back(); e != nil {
			m.lru.Remove(e)
			delete(m.buckets, e.Value.(*bucket).key)
		}
	}
}

// Len is the number of buckets held, for tests and metrics.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}

var _ Limiter = (*Memory)(nil)
