package docstore_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/sessions/pgstore/docstore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// Updates of one document from three processes' pools never lose each
// other's changes (one counter, 30 increments, including the document's
// creation), and the stamp changes with each stored change only.
func TestUpdateUnderLock(t *testing.T) {
	dsn := pgtest.DSN(t)
	var stores []*docstore.Store
	for range 3 {
		s, err := docstore.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores = append(stores, s)
	}
	ctx := context.Background()
	if b, err := stores[0].Load(ctx, "test", "counter"); err != nil || b != nil {
		t.Fatalf("no document yet: %q, %v", b, err)
	}
	if st, err := stores[0].Stamp(ctx, "test", "counter"); err != nil || st != "" {
		t.Fatalf("no document yet: stamp %q, %v", st, err)
	}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := stores[i%3].Update(ctx, "test", "counter", func(old []byte) ([]byte, bool, error) {
				n := 0
				if old != nil {
					var err error
					if n, err = strconv.Atoi(string(old)); err != nil {
						return nil, false, err
					}
				}
				return []byte(strconv.Itoa(n + 1)), true, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, err := stores[1].Load(ctx, "test", "counter")
	if err != nil || string(b) != "30" {
		t.Fatalf("counter %q, %v; want 30", b, err)
	}
	before, _ := stores[2].Stamp(ctx, "test", "counter")
	if err := stores[2].Update(ctx, "test", "counter", func(old []byte) ([]byte, bool, error) { return nil, false, nil }); err != nil {
		t.Fatal(err)
	}
	if after, _ := stores[0].Stamp(ctx, "test", "counter"); after != before || before != "30" {
		t.Errorf("stamp %q after a no-change update (was %q); want 30 both", after, before)
	}
}
