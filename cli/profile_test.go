package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestProfiles: BUB_CPUPROFILE and BUB_MEMPROFILE each leave a pprof
// profile (gzip-compressed protobuf) when the command returns.
func TestProfiles(t *testing.T) {
	rate := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = rate }) // BUB_MEMPROFILE sets it for the process
	dir := t.TempDir()
	vars := map[string]string{
		"BUB_HOME":       filepath.Join(dir, "home"),
		"BUB_CPUPROFILE": filepath.Join(dir, "cpu.pprof"),
		"BUB_MEMPROFILE": filepath.Join(dir, "mem.pprof"),
	}
	if code, _, stderr := runCLIEnv(t, vars, "tools"); code != 0 {
		t.Fatalf("bub-mcp tools: exit %d\n%s", code, stderr)
	}
	for _, k := range []string{"BUB_CPUPROFILE", "BUB_MEMPROFILE"} {
		b, err := os.ReadFile(vars[k])
		if err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s: %d bytes, %v; want a gzip-compressed profile", k, len(b), err)
		}
	}
}
