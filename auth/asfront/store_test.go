package asfront_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/auth/asfront"
	"github.com/bubbuild/bub-mcp/auth/asfront/storetest"
)

func TestFileStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oauth.json")
	storetest.Run(t, func() asfront.Store { return asfront.NewFileStore(path, nil) })
}

// A code is single-use: the second Use sees it used, whichever process
// tries.
func ExampleFileStore() {
	tmp, cleanup := tempDir()
	defer cleanup()
	a := asfront.NewFileStore(filepath.Join(tmp, "oauth.json"), nil)
	b := asfront.NewFileStore(filepath.Join(tmp, "oauth.json"), nil)
	ctx := context.Background()
	_ = a.Create(ctx, asfront.KindCode, "hash-of-code", asfront.Record{Data: []byte(`{}`), Expires: time.Now().Add(time.Minute)})
	r1, _ := a.Use(ctx, asfront.KindCode, "hash-of-code")
	r2, _ := b.Use(ctx, asfront.KindCode, "hash-of-code")
	fmt.Println(r1.Used, r2.Used)
	// Output: false true
}

func tempDir() (string, func()) {
	d, err := os.MkdirTemp("", "asfront-example-")
	if err != nil {
		panic(err)
	}
	return d, func() { os.RemoveAll(d) }
}
