package oauthstore_test

import (
	"os"
	"testing"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/asfront"
	"github.com/bubbuild/bub-mcp/auth/asfront/storetest"
	"github.com/bubbuild/bub-mcp/auth/keystoretest"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/sessions/pgstore/oauthstore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestStore runs the store contract on a real PostgreSQL, each handle its
// own pool as each replica has.
func TestStore(t *testing.T) {
	dsn := pgtest.DSN(t)
	storetest.Run(t, func() asfront.Store {
		s, err := oauthstore.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	})
}

// TestKeyStore: replicas' key rings, each on its own pool, start and
// rotate at once on one database.
func TestKeyStore(t *testing.T) {
	dsn := pgtest.DSN(t)
	keystoretest.Run(t, func() auth.KeyStore {
		s, err := oauthstore.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s.Keys()
	})
}

// TestKeys: two replicas' key rings on one database publish each other's
// keys after a rotation.
func TestKeys(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, err := oauthstore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := oauthstore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ra, err := auth.NewKeyRing(t.Context(), auth.KeyRingOptions{Store: a.Keys()})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := auth.NewKeyRing(t.Context(), auth.KeyRingOptions{Store: b.Keys()})
	if err != nil {
		t.Fatal(err)
	}
	if ka, kb := ra.JWKS().Keys, rb.JWKS().Keys; len(ka) != 1 || len(kb) != 1 || ka[0].KeyID != kb[0].KeyID {
		t.Fatalf("the second replica made its own key instead of loading the first's")
	}
	if err := ra.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rb.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(rb.JWKS().Keys); n != 2 || !rb.SigningKeyCreated().Equal(ra.SigningKeyCreated()) {
		t.Errorf("after the first's rotation the second publishes %d keys; want 2, signing with the new one", n)
	}
}
