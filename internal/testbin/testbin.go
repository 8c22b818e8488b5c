// Package testbin builds the project's commands for tests that drive them
// as real processes: each package is built at most once per test binary,
// however many tests ask for it.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

// built is what Build made of each package, by import path.
var built sync.Map // import path → *build

type build struct {
	once sync.Once
	path string
	err  error
}

// Build builds the main package pkg (an import path such as
// "github.com/bubbuild/bub-mcp/cmd/bub-mcp") the first time it is asked
// for and returns the binary's path; a failed build fails tb.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	v, _ := built.LoadOrStore(pkg, new(build))
	b := v.(*build)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "bub-testbin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, path.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// Cleanup removes every binary Build made; a TestMain calls it after the
// tests ran, so test runs leave no binaries behind.
func Cleanup() {
	built.Range(func(_, v any) bool {
		if b := v.(*build); b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
		return true
	})
}
