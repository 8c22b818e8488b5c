package auth_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/keystoretest"
)

// TestKeyRingRotation: tokens the ring signed before a rotation stay valid
// at the resource server (no one is logged out), new tokens use the new
// key, a retired key disappears after Retain, and the ring survives a
// restart through its file store (mode 0600).
func TestKeyRingRotation(t *testing.T) {
	clk := newClock()
	store := auth.FileKeyStore{Path: filepath.Join(t.TempDir(), "keys", "ring.json")}
	ring, err := auth.NewKeyRing(t.Context(), auth.KeyRingOptions{Store: store, Retain: 2 * time.Hour, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(ring.JWKSHandler())
	defer jwks.Close()
	const issuer = "https://mcp.example.com/"
	rs := newRS(t, auth.Options{Issuer: issuer, JWKSURL: jwks.URL, Now: clk.Now, MinRefetchInterval: time.Second})
	srv := serve(t, rs)
	sign := func() string {
		tok, err := ring.Sign(map[string]any{"iss": issuer, "sub": "alice", "aud": public + "/mcp", "exp": clk.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	check := func(step, tok string, want int) {
		t.Helper()
		if got := call(t, srv, "/mcp", tok); got.status != want {
			t.Errorf("%s: status %d; want %d (%s)", step, got.status, want, got.body)
		}
	}
	before := sign()
	check("before rotation", before, 200)

	clk.Advance(10 * time.Second)
	if err := ring.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := sign()
	check("new key after rotation", after, 200)
	check("old token after rotation", before, 200)
	if n := len(ring.JWKS().Keys); n != 2 {
		t.Errorf("JWKS has %d keys after one rotation; want 2", n)
	}

	// A restart loads the same keys.
	again, err := auth.NewKeyRing(t.Context(), auth.KeyRingOptions{Store: store, Retain: 2 * time.Hour, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := again.JWKS().Keys, ring.JWKS().Keys; len(a) != len(b) || a[0].KeyID != b[0].KeyID || a[1].KeyID != b[1].KeyID {
		t.Errorf("reloaded ring has other keys")
	}
	if fi, err := os.Stat(store.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	clk.Advance(3 * time.Hour)
	if n := len(ring.JWKS().Keys); n != 1 {
		t.Errorf("JWKS has %d keys after Retain; want 1", n)
	}
}

// TestKeyRingShared: two rings on one store (two processes, replicas).
// One rotates; the other, after Reload, signs with the new key and
// publishes both, and a rotation by the second keeps the first's key.
func TestKeyRingShared(t *testing.T) {
	clk := newClock()
	store := auth.FileKeyStore{Path: filepath.Join(t.TempDir(), "ring.json")}
	opts := auth.KeyRingOptions{Store: store, Retain: 2 * time.Hour, Now: clk.Now}
	a, err := auth.NewKeyRing(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := auth.NewKeyRing(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if err := a.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !b.SigningKeyCreated().Equal(a.SigningKeyCreated()) || len(b.JWKS().Keys) != 2 {
		t.Errorf("after Reload: signing key of %v, %d keys; want %v, 2", b.SigningKeyCreated(), len(b.JWKS().Keys), a.SigningKeyCreated())
	}
	// b rotates without having reloaded a's next key: both stay.
	clk.Advance(time.Minute)
	if err := a.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if err := b.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(a.JWKS().Keys); n != 4 {
		t.Errorf("%d keys published after rotations by both; want 4", n)
	}
}

// TestFileKeyStore: rings of processes sharing one $BUB_HOME, each with
// its own FileKeyStore on the one file, start and rotate at once.
func TestFileKeyStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oauth", "keyring.json")
	keystoretest.Run(t, func() auth.KeyStore { return auth.FileKeyStore{Path: path} })
}

// pausedLoad is a FileKeyStore whose Load, having read, says so and then
// yields until the test has rotated: without end once an Update has
// begun, else for a bounded while (with the reads and rotations of a ring
// serialised, no Update can begin until Load returns).
type pausedLoad struct {
	auth.FileKeyStore
	loaded, updating, rotated *atomic.Bool
}

func (s pausedLoad) Load(ctx context.Context) ([]byte, error) {
	b, err := s.FileKeyStore.Load(ctx)
	s.loaded.Store(true)
	for i := 0; (i < 100_000 || s.updating.Load()) && !s.rotated.Load(); i++ {
		runtime.Gosched()
	}
	return b, err
}

func (s pausedLoad) Update(ctx context.Context, fn func([]byte) ([]byte, error)) error {
	s.updating.Store(true)
	return s.FileKeyStore.Update(ctx, fn)
}

// TestKeyRingReloadDuringRotate: a Reload that read the store before a
// Rotate of the same ring wrote it must not put the older ring back, or
// the ring signs with a retired key and other processes' next rotation
// drops its newest.
func TestKeyRingReloadDuringRotate(t *testing.T) {
	store := pausedLoad{auth.FileKeyStore{Path: filepath.Join(t.TempDir(), "ring.json")}, new(atomic.Bool), new(atomic.Bool), new(atomic.Bool)}
	ring, err := auth.NewKeyRing(t.Context(), auth.KeyRingOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	store.loaded.Store(false)
	store.updating.Store(false)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ring.Reload(t.Context()); err != nil {
			t.Error(err)
		}
	})
	for !store.loaded.Load() {
		runtime.Gosched()
	}
	if err := ring.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	store.rotated.Store(true)
	wg.Wait()
	if got, want := ring.SigningKeyCreated(), newest(t, store.FileKeyStore); !got.Equal(want) {
		t.Errorf("after a Reload overlapping a Rotate the ring signs with the key made at %v; want the stored ring's newest, made at %v", got, want)
	}
}

// newest is when the signing key of the ring in store was made.
func newest(t *testing.T, store auth.KeyStore) time.Time {
	t.Helper()
	r, err := auth.NewKeyRing(t.Context(), auth.KeyRingOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return r.SigningKeyCreated()
}
