// Package storetest checks an asfront.Store implementation against the
// contract the front relies on; each implementation's tests call Run.
package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/auth/asfront"
)

// Run checks what the front relies on: single use under
// concurrency from separate handles (processes, replicas), family
// revocation, and counting only unexpired records.
func Run(t *testing.T, open func() asfront.Store) {
	ctx := t.Context()
	s := open()
	if err := s.Create(ctx, asfront.KindCode, "k", asfront.Record{Data: []byte(`{"a":1}`), Family: "f1", Expires: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, asfront.KindCode, "k", asfront.Record{Data: []byte(`{}`)}); !errors.Is(err, asfront.ErrExists) {
		t.Errorf("second Create = %v; want ErrExists", err)
	}
	if _, err := s.Get(ctx, asfront.KindCode, "missing"); !errors.Is(err, asfront.ErrNotFound) {
		t.Errorf("Get(missing) = %v; want ErrNotFound", err)
	}
	// Eight handles race to use one record: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	first := 0
	for range 8 {
		h := open()
		wg.Go(func() {
			r, err := h.Use(context.Background(), asfront.KindCode, "k")
			if err != nil {
				t.Error(err)
				return
			}
			if !r.Used {
				mu.Lock()
				first++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != 1 {
		t.Errorf("%d uses saw the record unused; want 1", first)
	}
	if err := s.Create(ctx, asfront.KindRefresh, "r", asfront.Record{Data: []byte(`{}`), Family: "f1", Expires: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, asfront.KindRefresh, "other", asfront.Record{Data: []byte(`{}`), Family: "f2", Expires: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeFamily(ctx, "f1"); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"r": true, "other": false} {
		r, err := s.Get(ctx, asfront.KindRefresh, key)
		if err != nil || r.Revoked != want {
			t.Errorf("Get(%s) = %+v, %v; want Revoked %v", key, r, err, want)
		}
	}
	if n, err := s.Count(ctx, asfront.KindRefresh); n != 1 || err != nil {
		t.Errorf("Count = %d, %v; want 1 (one is expired)", n, err)
	}
}
