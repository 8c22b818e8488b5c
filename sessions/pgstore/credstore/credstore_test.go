package credstore_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
