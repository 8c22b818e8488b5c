package upstream_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment/envtest"
	"github.com/bubbuild/bub-mcp/internal/proctest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// cgroupOf is the cgroup2 path of pid ("0::/..." in /proc/<pid>/cgroup),
// or its whole cgroup file where there is no cgroup2 line.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	return string(b)
}

// A stdio server is spawned by the upstream's environment ("local" by
// default) as its other processes are: leading a process group of its
// own and, where the environment tracks trees, in a cgroup of its own.
func TestStdioUpstreamSupervisedByEnvironment(t *testing.T) {
	envtest.RequireTreeTracking(t)
	h := newHost(t, fakeTable(t, "fake", ""), "")
	pid := h.waitState(t, "fake", "ready", nil).PID
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{"leads its group": pgid == pid, "cgroup of its own": cgroupOf(t, pid) != cgroupOf(t, os.Getpid())}
	want := map[string]bool{"leads its group": true, "cgroup of its own": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("server process %d (-want +got):\n%s", pid, diff)
	}
}

// No survivors: a daemon a stdio server started, which left the server's
// process group and session (setsid), is gone once the App closes, as
// the environment's supervisor ends the whole tree.
func TestCloseLeavesNoSurvivors(t *testing.T) {
	envtest.RequireTreeTracking(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "daemon.pid")
	// The daemon writes its pid (sh execs sleep, so $$ is sleep's), then
	// the server starts.
	script := `setsid -f sh -c 'echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 300' "$0" </dev/null >/dev/null 2>&1
while [ ! -e "$0" ]; do sleep 0.01; done
exec "$@"`
	h := newHost(t, stdioTable("fake", "sh", []string{"-c", script, pidFile, fakeBinary(t)}, ""), "")
	leader := h.waitState(t, "fake", "ready", nil).PID
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	daemon, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if pgid, _ := syscall.Getpgid(daemon); pgid == leader || proctest.Gone(daemon) {
		t.Fatalf("daemon %d in group %d (server %d): want it running outside the server's group", daemon, pgid, leader)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitGone(t, 10*time.Second, leader, daemon)
}

// A stdio server with environment = "sandbox" runs in bubblewrap: it
// cannot read $HOME or $BUB_HOME, which the same server run locally can,
// not even from a cwd that holds $BUB_HOME.
func TestSandboxedUpstream(t *testing.T) {
	testenv.MustHaveBwrap(t)
	bin := fakeBinary(t)
	home := t.TempDir() // $BUB_HOME
	userHome, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for what, dir := range map[string]string{"$HOME": userHome, "$BUB_HOME": home} {
		f, err := os.CreateTemp(dir, ".bub-secret-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(f.Name()) })
		if _, err := f.WriteString("s3cret-" + what); err != nil {
			t.Fatal(err)
		}
		f.Close()
		secrets[what] = f.Name()
	}
	src := stdioTable("plain", bin, nil, "") + stdioTable("boxed", bin, nil, `environment = "sandbox"
[upstreams.boxed.sandbox]
read_only = [`+strconv.Quote(filepath.Dir(bin))+`]
`) + stdioTable("boxedcwd", bin, nil, `environment = "sandbox"
cwd = `+strconv.Quote(filepath.Dir(home))+`
[upstreams.boxedcwd.sandbox]
read_only = [`+strconv.Quote(filepath.Dir(bin))+`]
`)
	h := newHost(t, src, home)
	h.waitState(t, "boxed", "ready", nil)
	h.waitState(t, "boxedcwd", "ready", nil)
	got, want := map[string]string{}, map[string]string{}
	for what, path := range secrets {
		got["plain reads "+what] = h.text(t, "plain.read", map[string]any{"path": path})
		want["plain reads "+what] = "s3cret-" + what
		text := h.text(t, "boxed.read", map[string]any{"path": path})
		got["boxed reads "+what] = text
		if strings.HasPrefix(text, "error: ") && strings.Contains(text, "no such file or directory") {
			got["boxed reads "+what] = "not found"
		}
		want["boxed reads "+what] = "not found"
	}
	// Nor when $BUB_HOME lies inside the server's cwd, mounted writable.
	text := h.text(t, "boxedcwd.read", map[string]any{"path": secrets["$BUB_HOME"]})
	got["boxed in its parent reads $BUB_HOME"] = text
	if strings.HasPrefix(text, "error: ") && strings.Contains(text, "no such file or directory") {
		got["boxed in its parent reads $BUB_HOME"] = "not found"
	}
	want["boxed in its parent reads $BUB_HOME"] = "not found"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reads (-want +got):\n%s", diff)
	}
	// The sandbox's supervisor is the process the status names.
	pid := h.status(t, "boxed").PID
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil || filepath.Base(exe) != "bwrap" {
		t.Errorf("sandboxed server's process %d runs %q (%v); want bwrap", pid, exe, err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitGone(t, 10*time.Second, pid)
}

// A pre-installed npm server (server-everything under the pinned Node)
// works in the sandbox with its installation mounted read-only and no
// network.
func TestSandboxedNPMServer(t *testing.T) {
	testenv.MustHaveBwrap(t)
	cmd, args := npmServer(t, "server-everything", "stdio")
	// The sandbox mounts real, absolute paths (a relative one is taken
	// from bub.toml's directory): e2e/node_modules may be a symlink, or
	// not (a fresh clone).
	abs, err := filepath.Abs(nodeModules)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		t.Fatal(err)
	}
	real := func(p string) string {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cmd, args[0] = real(cmd), real(args[0])
	h := newHost(t, stdioTable("everything", cmd, args, `environment = "sandbox"
[upstreams.everything.sandbox]
read_only = [`+strconv.Quote(root)+`]
network = "none"
memory = "4GiB"
`), "")
	h.waitState(t, "everything", "ready", nil)
	if got := h.text(t, "everything.echo", map[string]any{"message": "boxed"}); got != "Echo: boxed" {
		t.Errorf("echo in the sandbox = %q", got)
	}
}
