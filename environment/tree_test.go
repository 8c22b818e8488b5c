package environment_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// TestOpenTree: both environments list and read a directory through
// OpenTree, refuse one outside their confinement, and keep a symlink in
// the tree from leading out.
func TestOpenTree(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	kinds := []struct {
		name string
		make func(t *testing.T, ws string) environment.Environment
	}{
		{"local confined", func(t *testing.T, ws string) environment.Environment {
			e, err := environment.NewLocal(&environment.LocalOptions{Workspace: ws, Confine: true})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}},
		{"sandbox", func(t *testing.T, ws string) environment.Environment {
			testenv.MustHaveBwrap(t)
			e, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ws := t.TempDir()
			env := k.make(t, ws)
			t.Cleanup(func() { env.Close() })
			for name, content := range map[string]string{"a.txt": "A", "sub/b.txt": "B"} {
				p := filepath.Join(ws, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(outside, filepath.Join(ws, "sub", "out")); err != nil {
				t.Fatal(err)
			}
			tr := env.(environment.TreeReader)
			tree, err := tr.OpenTree(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Close()
			var names []string
			err = fs.WalkDir(tree, ".", func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				names = append(names, p)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{".", "a.txt", "sub", "sub/b.txt", "sub/out"}, names); diff != "" {
				t.Errorf("walk (-want +got):\n%s", diff)
			}
			if b, err := fs.ReadFile(tree, "sub/b.txt"); err != nil || string(b) != "B" {
				t.Errorf("ReadFile(sub/b.txt) = %q, %v", b, err)
			}
			if b, err := fs.ReadFile(tree, "sub/out/secret.txt"); err == nil {
				t.Errorf("read through a symlink to outside: %q", b)
			}
			sub, err := tr.OpenTree(filepath.Join(ws, "sub"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sub.Stat("b.txt"); err != nil {
				t.Errorf("Stat in the sub-tree: %v", err)
			}
			sub.Close()
			for _, p := range []string{outside, filepath.Join(ws, "sub", "out"), "/etc"} {
				if tr, err := tr.OpenTree(p); err == nil {
					tr.Close()
					t.Errorf("OpenTree(%s) succeeded; want it refused", p)
				}
			}
			if _, err := tr.OpenTree(filepath.Join(ws, "missing")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("OpenTree(missing) = %v; want not exist", err)
			}
			if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"a.txt", "fifo"} {
				// A FIFO must be refused, not block OpenTree.
				if _, err := tr.OpenTree(filepath.Join(ws, name)); err == nil {
					t.Errorf("OpenTree(%s) succeeded; want not a directory", name)
				}
			}
		})
	}
}
