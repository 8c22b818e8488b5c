package credstore_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/sessions/pgstore/credstore"
	"github.com/bubbuild/bub-mcp/upstream"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func open(t *testing.T, dsn string) *credstore.Store {
	t.Helper()
	s, err := credstore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Two replicas on one database share the sets: one stores, the other
// reads, lists, replaces and deletes; sets are per (server, principal).
func TestSharedCredentials(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := context.Background()
	if _, err := a.Get(ctx, "gh", "alice"); !errors.Is(err, upstream.ErrNoCredentials) {
		t.Fatalf("Get before Put: %v; want ErrNoCredentials", err)
	}
	for _, p := range []struct{ server, principal, sealed string }{
		{"gh", "alice", "a1"}, {"gh", "bob", "b1"}, {"other", "alice", "o1"},
	} {
		if err := a.Put(ctx, p.server, p.principal, []byte(p.sealed)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := b.Get(ctx, "gh", "alice"); err != nil || string(got) != "a1" {
		t.Errorf("Get on the other replica: %q %v; want a1", got, err)
	}
	if err := b.Put(ctx, "gh", "alice", []byte("a2")); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Get(ctx, "gh", "alice"); err != nil || string(got) != "a2" {
		t.Errorf("Get after a replace: %q %v; want a2", got, err)
	}
	ps, err := b.Principals(ctx, "gh")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"alice", "bob"}, ps); diff != "" {
		t.Errorf("Principals (-want +got):\n%s", diff)
	}
	if found, err := b.Delete(ctx, "gh", "alice"); err != nil || !found {
		t.Errorf("Delete: %v %v", found, err)
	}
	if found, err := a.Delete(ctx, "gh", "alice"); err != nil || found {
		t.Errorf("Delete again: %v %v; want not found", found, err)
	}
	if _, err := a.Get(ctx, "gh", "alice"); !errors.Is(err, upstream.ErrNoCredentials) {
		t.Errorf("Get after Delete: %v; want ErrNoCredentials", err)
	}
	if got, err := a.Get(ctx, "other", "alice"); err != nil || string(got) != "o1" {
		t.Errorf("another server's set: %q %v; want o1", got, err)
	}
}

// Lock holds (server, principal) against another replica until unlock;
// other pairs are free.
func TestLock(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	unlock, err := a.Lock(t.Context(), "gh", "alice")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	if _, err := b.Lock(ctx, "gh", "alice"); err == nil {
		t.Error("the other replica took a held lock")
	}
	cancel()
	other, err := b.Lock(t.Context(), "gh", "bob")
	if err != nil {
		t.Fatalf("another principal's lock: %v", err)
	}
	other()
	got := make(chan error, 1)
	go func() {
		u, err := b.Lock(t.Context(), "gh", "alice")
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Errorf("the lock after unlock: %v", err)
	}
}

// A login nonce is marked once across replicas; marks past their expiry
// are purged (so the same nonce marks again); with MaxLoginsInFlight
// unexpired marks a new nonce is refused, and a used one is still told
// used.
func TestLoginNonces(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := t.Context()
	later := time.Now().Add(time.Minute)
	if ok, err := a.UseNonce(ctx, "n1", later); !ok || err != nil {
		t.Fatalf("first use: %v %v; want true", ok, err)
	}
	if ok, err := b.UseNonce(ctx, "n1", later); ok || err != nil {
		t.Errorf("the same nonce on the other replica: %v %v; want false", ok, err)
	}
	if ok, err := a.UseNonce(ctx, "old", time.Now().Add(-time.Second)); !ok || err != nil {
		t.Fatalf("an expired mark: %v %v", ok, err)
	}
	if ok, err := b.UseNonce(ctx, "old", time.Now().Add(-time.Second)); !ok || err != nil {
		t.Errorf("an expired mark again (purged first): %v %v; want true", ok, err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO bub_upstream_login_nonces (nonce, expires)
		SELECT 'fill' || i, now() + interval '1 minute' FROM generate_series(2, $1) AS i`, upstream.MaxLoginsInFlight); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.UseNonce(ctx, "n2", later); ok || !errors.Is(err, upstream.ErrTooManyLogins) {
		t.Errorf("a new nonce with the store full: %v %v; want ErrTooManyLogins", ok, err)
	}
	if ok, err := b.UseNonce(ctx, "n1", later); ok || err != nil {
		t.Errorf("a used nonce with the store full: %v %v; want false", ok, err)
	}
}
