package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/internal/lockedfile"
	"github.com/go-jose/go-jose/v4"
)

// KeyStore keeps a KeyRing's private keys between runs: a file under
// $BUB_HOME on one machine (FileKeyStore), the shared store for replicas.
// The blob is secret; implementations keep it out of other users' reach.
type KeyStore interface {
	// Load returns the saved ring, or fs.ErrNotExist when there is none.
	Load(ctx context.Context) ([]byte, error)
	// Update replaces the saved ring with what fn makes of it (old is nil
	// when none is saved). No other Update of the store, in this process
	// or another, runs between fn's read and the write: processes that
	// rotate at once each keep the other's new key, so none signs with a
	// key the others do not publish. An error from fn leaves the ring as
	// it was and is returned.
	Update(ctx context.Context, fn func(old []byte) ([]byte, error)) error
}

// FileKeyStore is a KeyStore in one file, written atomically with mode
// 0600. Updates lock Path+".lock", which processes on one $BUB_HOME share.
type FileKeyStore struct{ Path string }

// Load reads the file without the lock: Update replaces it by a rename, so
// a reader sees the old ring or the new one.
func (f FileKeyStore) Load(context.Context) ([]byte, error) { return os.ReadFile(f.Path) }

// Update implements KeyStore, holding the lock file across the read, fn
// and the write.
func (f FileKeyStore) Update(ctx context.Context, fn func(old []byte) ([]byte, error)) error {
	unlock, err := lockedfile.Lock(ctx, f.Path+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	old, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		old, err = nil, nil
	}
	if err != nil {
		return err
	}
	blob, err := fn(old)
	if err != nil {
		return err
	}
	return lockedfile.Write(f.Path, blob, 0o600)
}

// KeyRingOptions configure NewKeyRing; zero values mean the defaults named.
type KeyRingOptions struct {
	// Store keeps the keys; nil keeps them in memory only (tests: a restart
	// then invalidates every token).
	Store KeyStore
	// Retain is how long a key stays published after a newer one took
	// over signing: at least the longest token lifetime, so rotation logs
	// nobody out. 0 means 24 h.
	Retain time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// KeyRing is the signing key ring of bub-mcp's own authorization-server
// front: the newest key signs (ES256), every key not yet retired for
// Retain is published in the JWKS, so tokens signed before a rotation stay
// valid until they expire. Safe for concurrent use.
type KeyRing struct {
	opts KeyRingOptions

	// storeMu is held from a read of the store to the assignment of keys
	// from it, so an older read never replaces a newer ring (a Reload
	// overlapping a Rotate would otherwise drop the key just made).
	storeMu sync.Mutex

	mu   sync.RWMutex
	keys []ringKey // oldest first; the last one signs
}

type ringKey struct {
	JWK     jose.JSONWebKey `json:"jwk"`
	Created time.Time       `json:"created"`
	// Retired is when a newer key took over; zero for the signing key.
	Retired time.Time `json:"retired,omitzero"`
}

// NewKeyRing loads the ring from opts.Store, or creates one with a fresh
// key and saves it. The creation is an Update that keeps a ring another
// process saved meanwhile, so replicas starting together on an empty store
// end with one ring, not each with a key the others lack.
func NewKeyRing(ctx context.Context, opts KeyRingOptions) (*KeyRing, error) {
	if opts.Retain <= 0 {
		opts.Retain = 24 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	k := &KeyRing{opts: opts}
	if opts.Store == nil {
		nk, err := newRingKey(opts.Now())
		if err != nil {
			return nil, err
		}
		k.keys = []ringKey{nk}
		return k, nil
	}
	keys, err := k.load(ctx)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		nk, err := newRingKey(opts.Now())
		if err != nil {
			return nil, err
		}
		err = opts.Store.Update(ctx, func(old []byte) ([]byte, error) {
			stored, err := decode(old)
			if err != nil {
				return nil, err
			}
			if len(stored) > 0 { // another process made the ring meanwhile
				keys = stored
				return old, nil
			}
			keys = []ringKey{nk}
			return json.Marshal(keys)
		})
		if err != nil {
			return nil, fmt.Errorf("auth: key ring: %w", err)
		}
	}
	k.keys = keys
	return k, nil
}

// newRingKey makes a signing key created at now.
func newRingKey(now time.Time) (ringKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return ringKey{}, fmt.Errorf("auth: key ring: %w", err)
	}
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	return ringKey{JWK: jose.JSONWebKey{Key: priv, KeyID: fmt.Sprintf("%x", id), Algorithm: string(jose.ES256), Use: "sig"}, Created: now}, nil
}

// load reads the stored ring; nil without one.
func (k *KeyRing) load(ctx context.Context) ([]ringKey, error) {
	blob, err := k.opts.Store.Load(ctx)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: key ring: %w", err)
	}
	keys, err := decode(blob)
	if err != nil {
		return nil, fmt.Errorf("auth: key ring: %w", err)
	}
	return keys, nil
}

// decode parses a stored ring; nil for none.
func decode(blob []byte) ([]ringKey, error) {
	if blob == nil {
		return nil, nil
	}
	var keys []ringKey
	if err := json.Unmarshal(blob, &keys); err != nil {
		return nil, err
	}
	for i, rk := range keys {
		if rk.JWK.IsPublic() || !rk.JWK.Valid() {
			return nil, fmt.Errorf("key %d is not a valid private key", i)
		}
	}
	return keys, nil
}

// Reload replaces the ring with the stored one, so processes sharing a
// store (replicas, several serves on one $BUB_HOME) sign with, and
// publish, the keys another one rotated in. A ring without a store, or a
// store without a ring, is left as it is.
func (k *KeyRing) Reload(ctx context.Context) error {
	if k.opts.Store == nil {
		return nil
	}
	k.storeMu.Lock()
	defer k.storeMu.Unlock()
	keys, err := k.load(ctx)
	if err != nil || len(keys) == 0 {
		return err
	}
	k.set(keys)
	return nil
}

// set replaces the keys; the caller holds k.storeMu.
func (k *KeyRing) set(keys []ringKey) {
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
}

// Rotate makes a new signing key; the previous one stays published for
// Retain, and keys retired longer ago are dropped. The new ring is made
// from the stored one inside one Update, so a key another process rotated
// in, even at the same moment, stays published.
func (k *KeyRing) Rotate(ctx context.Context) error {
	now := k.opts.Now()
	nk, err := newRingKey(now)
	if err != nil {
		return err
	}
	k.storeMu.Lock()
	defer k.storeMu.Unlock()
	if k.opts.Store == nil {
		k.set(k.rotated(nil, nk, now))
		return nil
	}
	var keys []ringKey
	err = k.opts.Store.Update(ctx, func(old []byte) ([]byte, error) {
		stored, err := decode(old)
		if err != nil {
			return nil, err
		}
		keys = k.rotated(stored, nk, now)
		return json.Marshal(keys)
	})
	if err != nil {
		return fmt.Errorf("auth: key ring: %w", err)
	}
	k.set(keys)
	return nil
}

// rotated is the ring after nk takes over signing at now: the stored keys
// (whose retirement times are the authority) and this ring's keys the
// store lacks (so this process's own keys stay published even if the
// stored ring lost them), each retired at now unless it was before, those
// retired for Retain dropped, nk last. The caller holds k.storeMu.
func (k *KeyRing) rotated(stored []ringKey, nk ringKey, now time.Time) []ringKey {
	old := slices.Clone(stored)
	for _, rk := range k.keys {
		if !slices.ContainsFunc(stored, func(s ringKey) bool { return s.JWK.KeyID == rk.JWK.KeyID }) {
			old = append(old, rk)
		}
	}
	slices.SortStableFunc(old, func(a, b ringKey) int { return a.Created.Compare(b.Created) })
	keys := make([]ringKey, 0, len(old)+1)
	for _, rk := range old {
		if rk.Retired.IsZero() {
			rk.Retired = now
		}
		if now.Sub(rk.Retired) < k.opts.Retain {
			keys = append(keys, rk)
		}
	}
	return append(keys, nk)
}

// Sign signs claims (a JSON-marshalable value) with the current key, as an
// RFC 9068 access token (typ at+jwt).
func (k *KeyRing) Sign(claims any) (string, error) {
	k.mu.RLock()
	cur := k.keys[len(k.keys)-1].JWK
	k.mu.RUnlock()
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("auth: signing: %w", err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: cur},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return "", fmt.Errorf("auth: signing: %w", err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("auth: signing: %w", err)
	}
	return jws.CompactSerialize()
}

// SigningKeyCreated returns when the current signing key was made, for a
// caller that rotates on age.
func (k *KeyRing) SigningKeyCreated() time.Time {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.keys[len(k.keys)-1].Created
}

// JWKS returns the public keys still valid for verification.
func (k *KeyRing) JWKS() jose.JSONWebKeySet {
	now := k.opts.Now()
	k.mu.RLock()
	defer k.mu.RUnlock()
	var set jose.JSONWebKeySet
	for _, rk := range k.keys {
		if rk.Retired.IsZero() || now.Sub(rk.Retired) < k.opts.Retain {
			set.Keys = append(set.Keys, rk.JWK.Public())
		}
	}
	return set
}

// JWKSHandler serves JWKS as the front's jwks_uri.
func (k *KeyRing) JWKSHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		_ = json.NewEncoder(w).Encode(k.JWKS())
	})
}
