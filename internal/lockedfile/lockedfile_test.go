package lockedfile_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/lockedfile"
	"github.com/google/go-cmp/cmp"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name string
		path string
		old  string // "" = no file before
		perm os.FileMode
	}{
		{name: "new file in new directories", path: "a/b/f.json", perm: 0o600},
		{name: "replaces", path: "g.json", old: "old content that is longer", perm: 0o600},
		{name: "other mode", path: "h.json", old: "x", perm: 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tt.path)
			if tt.old != "" {
				if err := os.WriteFile(path, []byte(tt.old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := lockedfile.Write(path, []byte("new"), tt.perm); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("new "+tt.perm.String(), string(got)+" "+st.Mode().Perm().String()); diff != "" {
				t.Errorf("file (-want +got):\n%s", diff)
			}
			if names := dirNames(t, filepath.Dir(path)); !cmp.Equal(names, []string{filepath.Base(path)}) {
				t.Errorf("directory holds %v; want only %s (no temporary file left)", names, filepath.Base(path))
			}
			if dst, err := os.Stat(filepath.Dir(path)); filepath.Dir(path) != dir && (err != nil || dst.Mode().Perm() != 0o700) {
				t.Errorf("created directory: %v, %v; want mode 0700", dst, err)
			}
		})
	}
}

// TestWriteFails leaves the old file as it was and no temporary file.
func TestWriteFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.Mkdir(path, 0o700); err != nil { // a directory: the rename fails
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := lockedfile.Write(path, []byte("new"), 0o600); err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	if names := dirNames(t, dir); !cmp.Equal(names, []string{"f"}) {
		t.Errorf("directory holds %v; want only f", names)
	}
}

// TestLockSerialises runs read-modify-write cycles from many goroutines,
// each with its own open file (as separate processes have): none is lost.
func TestLockSerialises(t *testing.T) {
	dir := t.TempDir()
	data, lock := filepath.Join(dir, "n"), filepath.Join(dir, "n.lock")
	const workers, rounds = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range rounds {
				if err := increment(data, lock); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != strconv.Itoa(workers*rounds) {
		t.Errorf("counter = %s; want %d", got, workers*rounds)
	}
}

func increment(data, lock string) error {
	unlock, err := lockedfile.Lock(context.Background(), lock)
	if err != nil {
		return err
	}
	defer unlock()
	n := 0
	if b, err := os.ReadFile(data); err == nil {
		n, _ = strconv.Atoi(string(b))
	}
	return lockedfile.Write(data, []byte(strconv.Itoa(n+1)), 0o600)
}

// TestLockContext: a lock another holder keeps is given up when ctx ends,
// and taken once it is released.
func TestLockContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.lock")
	unlock, err := lockedfile.Lock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := lockedfile.Lock(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held lock = %v; want the context's deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockedfile.Lock(context.Background(), path)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Fatalf("Lock after release = %v", err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
