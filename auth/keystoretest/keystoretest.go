// Package keystoretest checks an auth.KeyStore implementation, with the
// KeyRings on it, against what processes sharing it rely on; each
// implementation's tests call Run.
package keystoretest

import (
	"errors"
	"io/fs"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/bubbuild/bub-mcp/auth"
)

const (
	issuer   = "https://mcp.example.com/"
	public   = "https://mcp.example.com"
	resource = public + "/mcp"
	// rings and rounds: so many KeyRings (processes) rotate so many times
	// each, all at once.
	rings, rounds = 4, 5
)

// Run checks, on a store that open returns a new handle to each time (as
// each process has its own) and that starts empty: a failed Update
// changes nothing; KeyRings starting at once on the empty store end with
// one ring; KeyRings rotating at once lose no key, so the stored ring
// publishes every key any of them signs with and a KeyRing loaded fresh
// from the store verifies every one's tokens.
func Run(t *testing.T, open func() auth.KeyStore) {
	ctx := t.Context()
	failed := errors.New("fn failed")
	var seen []byte
	err := open().Update(ctx, func(old []byte) ([]byte, error) {
		seen = old
		return []byte("[]"), failed
	})
	if !errors.Is(err, failed) {
		t.Errorf("Update with a failing fn = %v; want fn's error", err)
	}
	if seen != nil {
		t.Errorf("Update on an empty store passed fn %q; want nil", seen)
	}
	if blob, err := open().Load(ctx); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load after a failed Update = %q, %v; want fs.ErrNotExist", blob, err)
	}

	// Start: every ring signs with the one key the store keeps.
	var wg sync.WaitGroup
	all := make([]*auth.KeyRing, rings)
	for i := range all {
		store := open()
		wg.Go(func() {
			r, err := auth.NewKeyRing(ctx, auth.KeyRingOptions{Store: store})
			if err != nil {
				t.Error(err)
				return
			}
			all[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	first := signingKey(t, all[0])
	var started []string
	for _, r := range all {
		started = append(started, signingKey(t, r))
	}
	if diff := cmp.Diff(slices.Repeat([]string{first}, rings), started); diff != "" {
		t.Errorf("signing keys of rings started at once (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{first}, published(t, open())); diff != "" {
		t.Errorf("stored keys after the start (-want +got):\n%s", diff)
	}

	// Rotation: each ring signs with each key it makes.
	signed := make([][]string, rings)
	for i, r := range all {
		wg.Go(func() {
			for range rounds {
				if err := r.Rotate(ctx); err != nil {
					t.Error(err)
					return
				}
				id, err := keyID(r)
				if err != nil {
					t.Error(err)
					return
				}
				signed[i] = append(signed[i], id)
			}
		})
	}
	wg.Wait()
	want := []string{first}
	for _, s := range signed {
		want = append(want, s...)
	}
	slices.Sort(want)
	if len(want) != 1+rings*rounds || len(slices.Compact(slices.Clone(want))) != len(want) {
		t.Fatalf("rings signed with %d distinct keys; want %d", len(slices.Compact(slices.Clone(want))), 1+rings*rounds)
	}
	if diff := cmp.Diff(want, published(t, open())); diff != "" {
		t.Errorf("stored keys after rings rotated at once (-want +got): every key a ring signs with must be stored\n%s", diff)
	}

	// A ring loaded fresh from the store, as another replica's is,
	// verifies the tokens every ring signs now.
	fresh, err := auth.NewKeyRing(ctx, auth.KeyRingOptions{Store: open()})
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(fresh.JWKSHandler())
	defer jwks.Close()
	rs, err := auth.NewResourceServer(auth.Options{Issuer: issuer, PublicURL: public, JWKSURL: jwks.URL})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range all {
		tok, err := r.Sign(map[string]any{"iss": issuer, "sub": "alice", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Verify(ctx, tok, resource); err != nil {
			t.Errorf("ring %d's token against a ring loaded from the store: %v", i, err)
		}
	}

	// A failed Update leaves the stored ring as it was.
	before, err := open().Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := open().Update(ctx, func([]byte) ([]byte, error) { return []byte("[]"), failed }); !errors.Is(err, failed) {
		t.Errorf("Update with a failing fn = %v; want fn's error", err)
	}
	after, err := open().Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("stored ring after a failed Update (-before +after):\n%s", diff)
	}
}

// signingKey is the key id r's tokens carry.
func signingKey(t *testing.T, r *auth.KeyRing) string {
	t.Helper()
	id, err := keyID(r)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// keyID is signingKey for goroutines other than the test's.
func keyID(r *auth.KeyRing) (string, error) {
	tok, err := r.Sign(map[string]any{"sub": "alice"})
	if err != nil {
		return "", err
	}
	jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return "", err
	}
	return jws.Signatures[0].Header.KeyID, nil
}

// published is the sorted key ids a KeyRing loaded from store publishes.
func published(t *testing.T, store auth.KeyStore) []string {
	t.Helper()
	r, err := auth.NewKeyRing(t.Context(), auth.KeyRingOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range r.JWKS().Keys {
		ids = append(ids, k.KeyID)
	}
	slices.Sort(ids)
	return ids
}
