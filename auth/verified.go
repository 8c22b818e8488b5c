package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// maxVerified bounds the verified-token cache: a few KiB each, so a few
// MiB in all, whatever the callers send.
const maxVerified = 4096

// verifiedCache remembers the claims of JWTs whose signature checked out,
// by the token's SHA-256, so that a client's every request does not pay
// for the signature again (ES256: ~86 µs, a third of a tools/call over
// HTTP). An entry holds only for the key set it was verified with (any
// JWKS refresh drops it) and until the token's exp; the claims (issuer,
// audience, times, scopes, rules) are still checked on every request.
type verifiedCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]verified
}

type verified struct {
	claims map[string]any // never changed after it is stored
	kid    string         // the token's key id
	keys   int            // keyCache.fetches when verified
	exp    time.Time
}

// get returns the entry of a token, if it is there and unexpired.
func (c *verifiedCache) get(sum [sha256.Size]byte, now time.Time) (verified, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[sum]
	if ok && !now.Before(v.exp) {
		delete(c.m, sum)
		ok = false
	}
	return v, ok
}

// drop forgets a token.
func (c *verifiedCache) drop(sum [sha256.Size]byte) {
	c.mu.Lock()
	delete(c.m, sum)
	c.mu.Unlock()
}

// put stores a verified token's claims; a token without exp is not kept.
func (c *verifiedCache) put(sum [sha256.Size]byte, v verified, now time.Time) {
	if v.exp.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[sha256.Size]byte]verified{}
	}
	if len(c.m) >= maxVerified {
		for k, e := range c.m {
			if !now.Before(e.exp) {
				delete(c.m, k)
			}
		}
		for k := range c.m { // still full: drop any (a miss only costs a check)
			if len(c.m) < maxVerified {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[sum] = v
}
