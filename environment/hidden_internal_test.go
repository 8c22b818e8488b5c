package environment

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenWriteChecksWhatItOpens: the sandbox's write path decides on the
// file it opened or the directory it creates in, not on a check of the
// path made earlier, which a sandboxed process could undo by swapping a
// symlink in. It is called here without that earlier check (locate), as
// a swap between the two would leave it.
func TestOpenWriteChecksWhatItOpens(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	home := filepath.Join(ws, ".bub")
	for _, d := range []string{home, filepath.Join(ws, "sub")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "bub.toml"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"toml": ".bub/bub.toml", "homelink": ".bub", "dangle": ".bub/new.txt",
		"chain": "dangle", "fine": "sub/new.txt"} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := newHiddenSet([]string{home}, ws, []string{ws})
	if err != nil {
		t.Fatal(err)
	}
	s := &SandboxEnvironment{hidden: h}
	r, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, rel := range []string{"toml", ".bub/bub.toml", "homelink/bub.toml", "homelink/new.txt", "dangle", "chain", ".bub/new.txt"} {
		f, err := s.openWrite(r, rel, rel)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, ErrOutsideWorkspace) {
			t.Errorf("openWrite(%q) = %v; want ErrOutsideWorkspace", rel, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(home, "new.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("new.txt was created in the hidden root (stat: %v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "bub.toml")); err != nil || string(b) != "secret" {
		t.Errorf("bub.toml = %q, %v", b, err)
	}
	// A dangling symlink to somewhere reachable is written through, as
	// open(O_CREAT) would.
	f, err := s.openWrite(r, "fine", "fine")
	if err != nil {
		t.Fatalf("openWrite through a dangling symlink into the workspace: %v", err)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(ws, "sub", "new.txt")); err != nil {
		t.Errorf("sub/new.txt was not created: %v", err)
	}
}
