package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileGlobMatchesNoTool: a profile's tools glob that matches no
// tool is a config error naming the profile, the glob and the line,
// from every command that loads the configuration; a glob that can name
// an upstream server's tools is not, since the server may not have
// registered them yet (here it cannot start at all).
func TestProfileGlobMatchesNoTool(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	cfg := filepath.Join(t.TempDir(), "bub.toml")
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]string{"BUB_HOME": home, "BUB_CONFIG": cfg}
	upstreams := "[upstreams.github]\ncommand = \"/no/such/github-server\"\nstart = \"lazy\"\n"
	write(upstreams + "[profiles.ro]\ntools = [\"fs.read\", \"fs.reed\"]\n")
	want := cfg + `:5: profiles.ro.tools: profile ro: tools glob "fs.reed" matches no tool`
	for _, args := range [][]string{{"tools"}, {"config", "check"}, {"call", "fs.read", "x"}, {"serve", "--check"}, {"serve", "--check", "--http", "127.0.0.1:0"}} {
		code, _, stderr := runCLIEnv(t, vars, append(args, "--workspace", ws)...)
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 1 and %q", args, code, stderr, want)
		}
	}
	for _, glob := range []string{"github.*", "git*", "github.search_*", "github_search*", "fs.*"} {
		write(upstreams + fmt.Sprintf("[profiles.ro]\ntools = [%q]\n", glob))
		if code, _, stderr := runCLIEnv(t, vars, "config", "check", "--workspace", ws); code != 0 {
			t.Errorf("tools = [%q]: exit %d, %s; want it accepted", glob, code, stderr)
		}
	}
}

// TestProfileView: tools --profile lists what that profile reaches,
// serve's start-up log counts it, and call --profile runs only those
// tools.
func TestProfileView(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "bub.toml")
	if err := os.WriteFile(cfg, []byte("[profiles.ro]\ntools = [\"fs.read\", \"tape.*\"]\ndeny = [\"tape.reset\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"BUB_HOME": home, "BUB_CONFIG": cfg}
	code, out, stderr := runCLIEnv(t, vars, "tools", "--profile", "ro", "--workspace", ws)
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		names = append(names, strings.Fields(line)[0])
	}
	if want := "fs.read tape.anchors tape.handoff tape.info tape.search"; code != 0 || strings.Join(names, " ") != want {
		t.Errorf("tools --profile ro: exit %d, %v (%s); want %s", code, names, stderr, want)
	}
	// serve's start-up log counts the same view, not every registered
	// tool (it said tools=22 for a profile serving none).
	if code, _, stderr := runCLIEnv(t, vars, "serve", "--profile", "ro", "--workspace", ws); code != 0 || !strings.Contains(stderr, "msg=mcp.stdio.start profile=ro tools=5\n") {
		t.Errorf("serve --profile ro: exit %d, stderr %q; want the start logged with tools=5", code, stderr)
	}
	if code, out, _ := runCLIEnv(t, vars, "tools", "--workspace", ws); code != 0 || !strings.Contains(out, "\nbash ") {
		t.Errorf("tools without --profile: exit %d; want every tool, bash included:\n%s", code, out)
	}
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"call", "--profile", "ro", "fs.read", "a.txt"}, 0, "hi\n", ""},
		{[]string{"call", "--profile", "ro", "bash", "command=echo no"}, 1, "", "[not_found] tool bash is not in profile ro's view"},
		{[]string{"call", "--profile", "ro", "tape.reset"}, 1, "", "[not_found] tool tape.reset is not in profile ro's view"},
		{[]string{"call", "bash", "command=echo yes"}, 0, "yes\n", ""},
	}
	for _, tt := range tests {
		code, out, stderr := runCLIEnv(t, vars, append(tt.args, "--workspace", ws)...)
		if code != tt.code || out != tt.stdout || !strings.Contains(stderr, tt.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, %q, %q", tt.args, code, out, stderr, tt.code, tt.stdout, tt.stderr)
		}
	}
}
