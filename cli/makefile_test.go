package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/testenv"
)

// TestMakeBuildSkipsWhenUnchanged: after `make build`, a second one (and
// so `make run`) finds the binary up to date and leaves it alone; a
// changed Go source makes it stale again.
func TestMakeBuildSkipsWhenUnchanged(t *testing.T) {
	testenv.MustHaveExec(t, "make", "apt-get install make")
	bin := filepath.Join(t.TempDir(), "bub-mcp")
	make := func(args ...string) error {
		cmd := exec.Command("make", append([]string{"-C", "..", "BIN=" + bin}, args...)...)
		cmd.Env = append(os.Environ(), "GOFLAGS=-trimpath")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("make %v: %s", args, out)
		}
		return err
	}
	if err := make("build"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := make("build"); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(bin); !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("make build relinked an up-to-date binary (mtime %v, then %v)", st.ModTime(), st2.ModTime())
	}
	// A binary older than the sources is rebuilt.
	old := time.Now().Add(-24 * time.Hour)
	if err := os.Chtimes(bin, old, old); err != nil {
		t.Fatal(err)
	}
	if err := make("build"); err != nil {
		t.Fatal(err)
	}
	if st3, _ := os.Stat(bin); !st3.ModTime().After(old.Add(time.Hour)) {
		t.Errorf("make build left a binary older than the sources (mtime %v)", st3.ModTime())
	}
}
