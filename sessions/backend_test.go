package sessions

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// TestOpenUnknownStore: a kind no imported package registered fails
// naming the fix, as database/sql does for a driver.
func TestOpenUnknownStore(t *testing.T) {
	_, err := Open(t.TempDir(), &Options{Store: "postgres", DSN: "postgres://x@127.0.0.1:1/x"})
	want := `sessions: unknown store "postgres" (forgotten import?)`
	if err == nil || err.Error() != want {
		t.Errorf("Open(Store: postgres) = %v; want %q", err, want)
	}
}

func TestRegister(t *testing.T) {
	tests := []struct {
		name string
		kind string
		open OpenBackend
	}{
		{"nil", "x", nil},
		{"empty kind", "", openFileBackend},
		{"twice", "file", openFileBackend},
		{"dotted kind", "x.y", openFileBackend},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", tt.kind)
				}
			}()
			Register(tt.kind, tt.open)
		})
	}
	if diff := cmp.Diff([]string{"file", MemoryKind}, Backends()); diff != "" {
		t.Errorf("Backends (-want +got):\n%s", diff)
	}
}

// TestNoDatabaseDriverLinked: importing sessions, or registry (which
// tools import), links no database driver; PostgreSQL comes with
// sessions/pgstore only.
func TestNoDatabaseDriverLinked(t *testing.T) {
	goBin := testenv.MustHaveExec(t, "go", "install Go (go.dev/dl)")
	for _, pkg := range []string{"github.com/bubbuild/bub-mcp/sessions", "github.com/bubbuild/bub-mcp/registry"} {
		out, err := exec.Command(goBin, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "jackc/") || strings.Contains(dep, "lib/pq") {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}
