package upstream

import (
	"testing"
	"time"
)

// TestExchangeCache: a token is reused until its renewal time, still
// sent (any) until it expires, and the least recently used principal
// goes first beyond capacity.
func TestExchangeCache(t *testing.T) {
	var c exchangeCache
	now := time.Now()
	c.put(&exchanged{principal: "a", token: "ta", renew: now.Add(time.Minute), exp: now.Add(2 * time.Minute)}, 2)
	c.put(&exchanged{principal: "b", token: "tb", renew: now.Add(time.Minute), exp: now.Add(2 * time.Minute)}, 2)
	if tok, ok := c.get("a", now, false); !ok || tok != "ta" {
		t.Fatalf("get(a) = %q, %v; want ta", tok, ok)
	}
	later := now.Add(90 * time.Second) // past renewal, before expiry
	if _, ok := c.get("a", later, false); ok {
		t.Errorf("a token due for renewal was reused")
	}
	if tok, ok := c.get("a", later, true); !ok || tok != "ta" {
		t.Errorf("get(a, any) before expiry = %q, %v; want ta", tok, ok)
	}
	if _, ok := c.get("a", now.Add(2*time.Minute), true); ok {
		t.Errorf("an expired token was returned")
	}
	// a is gone (expired); b, then c, then d: b is the least recently used.
	c.put(&exchanged{principal: "c", token: "tc", renew: now.Add(time.Minute), exp: now.Add(2 * time.Minute)}, 2)
	c.get("b", now, false)
	c.put(&exchanged{principal: "d", token: "td", renew: now.Add(time.Minute), exp: now.Add(2 * time.Minute)}, 2)
	for p, want := range map[string]bool{"b": true, "c": false, "d": true} {
		if _, ok := c.get(p, now, false); ok != want {
			t.Errorf("after eviction, %s cached = %v; want %v", p, ok, want)
		}
	}
	c.drop("b")
	if _, ok := c.get("b", now, true); ok {
		t.Errorf("a dropped token was returned")
	}
}
