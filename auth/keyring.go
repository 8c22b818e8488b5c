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
	// Save replaces the saved ring.
	Save(ctx context.Context, blob []byte) error
}

// FileKeyStore is a KeyStore in one file, written atomically with mode 0600.
type FileKeyStore struct{ Path string }

// Load reads the file.
func (f FileKeyStore) Load(context.Context) ([]byte, error) { return os.ReadFile(f.Path) }

// Save writes the file through a temporary file and a rename, so a crash
// never leaves half a key ring.
func (f FileKeyStore) Save(_ context.Context, blob []byte) error {
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
// key and saves it.
func NewKeyRing(ctx context.Context, opts KeyRingOptions) (*KeyRing, error) {
	if opts.Retain <= 0 {
		opts.Retain = 24 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	k := &KeyRing{opts: opts}
	if opts.Store != nil {
		keys, err := k.load(ctx)
		if err != nil {
			return nil, err
		}
		k.keys = keys
	}
	if len(k.keys) == 0 {
		if err := k.Rotate(ctx); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// load reads the stored ring; nil without one.
func (k *KeyRing) load(ctx context.Context) ([]ringKey, error) {
	blob, err := k.opts.Store.Load(ctx)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("auth: key ring: %w", err)
	}
	var keys []ringKey
	if err := json.Unmarshal(blob, &keys); err != nil {
		return nil, fmt.Errorf("auth: key ring: %w", err)
	}
	for i, rk := range keys {
		if rk.JWK.IsPublic() || !rk.JWK.Valid() {
			return nil, fmt.Errorf("auth: key ring: key %d is not a valid private key", i)
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
	keys, err := k.load(ctx)
	if err != nil || len(keys) == 0 {
		return err
	}
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
	return nil
}

// Rotate makes a new signing key; the previous one stays published for
// Retain, and keys retired longer ago are dropped. The stored ring is read
// first, so a key another process rotated in stays published.
func (k *KeyRing) Rotate(ctx context.Context) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("auth: key ring: %w", err)
	}
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	now := k.opts.Now()
	nk := ringKey{JWK: jose.JSONWebKey{Key: priv, KeyID: fmt.Sprintf("%x", id), Algorithm: string(jose.ES256), Use: "sig"}, Created: now}

	var stored []ringKey
	if k.opts.Store != nil {
		var err error
		if stored, err = k.load(ctx); err != nil {
			return err
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	old := slices.Clone(k.keys)
	for _, rk := range stored {
		if !slices.ContainsFunc(old, func(o ringKey) bool { return o.JWK.KeyID == rk.JWK.KeyID }) {
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
	keys = append(keys, nk)
	if k.opts.Store != nil {
		blob, err := json.Marshal(keys)
		if err != nil {
			return fmt.Errorf("auth: key ring: %w", err)
		}
		if err := k.opts.Store.Save(ctx, blob); err != nil {
			return fmt.Errorf("auth: key ring: saving: %w", err)
		}
	}
	k.keys = keys
	return nil
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
