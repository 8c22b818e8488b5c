package upstream_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/pgtest"
	_ "github.com/bubbuild/bub-mcp/sessions/pgstore" // store.postgres
	"github.com/bubbuild/bub-mcp/upstream"
)

// With [store] kind = "postgres", pins live in the database: a replica
// that first meets a server already pinned by another quarantines its new
// tool instead of trusting it on first use, and an approval made from a
// third machine's command reaches it. No pins file is written.
func TestPinsSharedOnPostgres(t *testing.T) {
	store := fmt.Sprintf("[store]\nkind = \"postgres\"\ndsn = %q\n\n", pgtest.DSN(t))
	home1, home2, home3 := t.TempDir(), t.TempDir(), t.TempDir()
	h1 := newHost(t, store+fakeTable(t, "fake", ""), home1)
	h1.waitState(t, "fake", upstream.StateReady, nil)
	h1.Close()

	src := store + fakeTable(t, "fake", "", "-add", "extra")
	h2 := newHost(t, src, home2)
	h2.waitState(t, "fake", upstream.StateReady, nil)
	if _, err := h2.Registry().Lookup("fake.extra"); err == nil {
		t.Fatal("fake.extra is listed on the second replica: its first list was trusted, not checked against the shared pins")
	}
	if _, err := h2.Registry().Lookup("fake.read"); err != nil {
		t.Fatalf("fake.read: %v", err)
	}
	for _, home := range []string{home1, home2} {
		if _, err := os.Stat(filepath.Join(home, "upstreams", "fake.pins.json")); err == nil {
			t.Errorf("a pins file in %s: pins belong in the database", home)
		}
	}
	cfg := filepath.Join(home3, "bub.toml")
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bubBinary(t), "upstreams", "approve", "fake", "extra")
	cmd.Env = append(os.Environ(), "BUB_HOME="+home3, "BUB_CONFIG="+cfg, "USER=ops")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "approved fake/extra") {
		t.Fatalf("upstreams approve on a third home: %v\n%s", err, out)
	}
	h2.waitTool(t, "fake.extra")
	if got := h2.text(t, "fake.extra", map[string]any{}); got != "added extra" {
		t.Errorf("fake.extra: %q", got)
	}
}
