package statekey

import (
	"bytes"
	"sync"
	"testing"
)

// Processes that start at once on a fresh home (two IDE windows) all get
// the one key that ends up in the file, never an error: the file appears
// whole or not at all.
func TestLoadConcurrentFirstRun(t *testing.T) {
	for range 300 {
		home := t.TempDir()
		const n = 8
		keys := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { keys[i], errs[i] = Load("", home) })
		}
		wg.Wait()
		final, err := Load("", home)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Load %d on a fresh home: %v", i, errs[i])
			}
			if !bytes.Equal(keys[i], final) {
				t.Fatalf("Load %d got a key the file does not hold", i)
			}
		}
	}
}
