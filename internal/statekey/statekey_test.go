package statekey_test

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/statekey"
)

// The key is the configured one's SHA-256, else one generated once under
// home (0600) and read back by the next process; a short configured key
// and a damaged file are errors that say what to do.
func TestLoad(t *testing.T) {
	if _, err := statekey.Load("short", ""); err == nil || !strings.Contains(err.Error(), "at least 32 characters") {
		t.Errorf("short key: %v", err)
	}
	configured := strings.Repeat("k", 32)
	k, err := statekey.Load(configured, t.TempDir())
	if sum := sha256.Sum256([]byte(configured)); err != nil || !bytes.Equal(k, sum[:]) {
		t.Errorf("configured: %x %v", k, err)
	}
	home := t.TempDir()
	k1, err := statekey.Load("", home)
	if err != nil || len(k1) != 32 {
		t.Fatalf("generated: %x %v", k1, err)
	}
	k2, err := statekey.Load("", home)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Errorf("read back: %x %v; want %x", k2, err, k1)
	}
	if fi, err := os.Stat(filepath.Join(home, statekey.FileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v; want mode 0600", fi.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(home, statekey.FileName), []byte("nothex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := statekey.Load("", home); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("damaged file: %v", err)
	}
	env := map[string]string{"BUB_STATE_KEY": "from-env"}
	if got := statekey.Configured(func(k string) string { return env[k] }, "from-toml"); got != "from-env" {
		t.Errorf("Configured = %q; want the variable first", got)
	}
	if got := statekey.Configured(func(string) string { return "" }, "from-toml"); got != "from-toml" {
		t.Errorf("Configured = %q; want [server] state_key", got)
	}
}
