package confirm_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/confirm"
	"github.com/google/go-cmp/cmp"
)

func TestFileQueue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "approvals")
	q := confirm.NewFileQueue(dir)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := confirm.Pending{ID: confirm.NewID(), Created: now, Deadline: now.Add(time.Minute), Tool: "bash", Args: json.RawMessage(`{"command":"ls"}`), Profile: "default"}
	if err := q.Add(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := q.Add(ctx, confirm.Pending{ID: "../escape"}); err == nil {
		t.Error("Add accepted an id that is a path")
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("queue directory mode %v, %v; want 0700", st.Mode().Perm(), err)
	}
	got, err := q.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]confirm.Pending{p}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	// Several consoles decide at once: exactly one decision counts.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = q.Decide(ctx, p.ID, confirm.Decision{Approved: i%2 == 0, By: "console"})
		}()
	}
	wg.Wait()
	oneDecision(t, errs)
	waitCtx, cancel := t.Context(), func() {}
	defer cancel()
	if _, err := q.Wait(waitCtx, p.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.List(ctx); len(got) != 0 {
		t.Errorf("a decided call is still listed: %v", got)
	}
	if err := q.Remove(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := q.Decide(ctx, p.ID, confirm.Decision{Approved: true}); !errors.Is(err, confirm.ErrNotPending) {
		t.Errorf("Decide after Remove = %v; want ErrNotPending", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

func TestFileQueueExpired(t *testing.T) {
	q := confirm.NewFileQueue(t.TempDir())
	now := time.Now()
	old := confirm.Pending{ID: confirm.NewID(), Created: now.Add(-time.Hour), Deadline: now.Add(-time.Second), Tool: "bash"}
	if err := q.Add(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.List(t.Context()); len(got) != 0 {
		t.Errorf("an expired call is listed: %v", got)
	}
	if err := q.Decide(t.Context(), old.ID, confirm.Decision{Approved: true}); !errors.Is(err, confirm.ErrNotPending) {
		t.Errorf("Decide on an expired call = %v; want ErrNotPending", err)
	}
}

func TestFileQueueWaitEndsWithContext(t *testing.T) {
	q := confirm.NewFileQueue(t.TempDir())
	p := confirm.Pending{ID: confirm.NewID(), Created: time.Now(), Deadline: time.Now().Add(time.Minute), Tool: "bash"}
	if err := q.Add(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := contextWithTimeout(t, 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := q.Wait(ctx, p.ID); err == nil {
		t.Fatal("Wait returned without a decision")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Wait took %v after its context ended", d)
	}
}

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}

// oneDecision checks racing Decide calls: exactly one counted, the others
// refused as no longer pending.
func oneDecision(t *testing.T, errs []error) {
	t.Helper()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, confirm.ErrNotPending):
			t.Errorf("Decide: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d decisions counted; want 1", won)
	}
}
