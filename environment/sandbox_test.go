package environment_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/environment/envtest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// newSandbox makes a sandbox on a fresh workspace, closed by the test's
// cleanup.
func newSandbox(t *testing.T, pol environment.SandboxPolicy) (*environment.SandboxEnvironment, string) {
	t.Helper()
	testenv.MustHaveBwrap(t)
	ws := t.TempDir()
	s, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: ws, Policy: pol})
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, ws
}

func run(t *testing.T, e environment.Environment, cmd string, env ...string) envtest.Result {
	t.Helper()
	p, err := e.Spawn(t.Context(), environment.Spec{Command: cmd, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return envtest.Collect(t, p)
}

// secret writes a file with a random secret into dir and removes it when
// the test ends.
func secret(t *testing.T, dir string) (path, value string) {
	t.Helper()
	f, err := os.CreateTemp(dir, ".bub-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	value = "s3cret-" + filepath.Base(f.Name())
	if _, err := f.WriteString(value); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return f.Name(), value
}

func TestSandboxEscapeWriteOutside(t *testing.T) {
	t.Parallel()
	s, ws := newSandbox(t, environment.SandboxPolicy{})
	outside := t.TempDir()
	target := filepath.Join(outside, "pwned")
	for _, tt := range []struct {
		cmd  string
		fail bool // else it may succeed, in the private /tmp
	}{
		{`echo x > "$T"`, true},
		{`echo x > /usr/pwned`, true},
		{`echo x > /pwned`, true},
		{`echo x > /etc/pwned`, true},
		{`mkdir -p "$(dirname "$T")" && echo x > "$T"`, false},
		{`echo x > "$W/../pwned"`, false},
	} {
		r := run(t, s, tt.cmd, "T="+target, "W="+ws)
		if tt.fail && r.Code == 0 {
			t.Errorf("%s: exit 0; want a failure", tt.cmd)
		}
	}
	for _, p := range []string{target, "/usr/pwned", "/pwned", "/etc/pwned", filepath.Join(filepath.Dir(ws), "pwned")} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was written from inside the sandbox", p)
		}
	}
	// The workspace itself is writable, and the host sees the write.
	if r := run(t, s, `echo inside > ok.txt`); r.Code != 0 {
		t.Fatalf("write in the workspace: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "ok.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("workspace file = %q, %v", b, err)
	}
}

func TestSandboxEscapeReadSecrets(t *testing.T) {
	t.Parallel()
	s, _ := newSandbox(t, environment.SandboxPolicy{})
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{os.TempDir(), home} {
		path, value := secret(t, dir)
		r := run(t, s, `cat "$S"; ls -a "$(dirname "$S")"`, "S="+path)
		if strings.Contains(r.Stdout, value) || strings.Contains(r.Stdout, filepath.Base(path)) {
			t.Errorf("secret in %s visible inside the sandbox: %q", dir, r.Stdout)
		}
		// The tools see what the sandbox sees: /tmp is the private one,
		// and $HOME is not there at all.
		if got, err := s.ReadText(t.Context(), path); err == nil || strings.Contains(got, value) {
			t.Errorf("ReadText(%s) = %q, %v; want an error", path, got, err)
		}
	}
	// The private /tmp is shared by the environment's processes and the
	// file tools, and not with the host. The name is the test's own, so a
	// file the host happens to hold under /tmp is not taken for a leak.
	note := "/tmp/bub-sandbox-note-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := os.Stat(note); err == nil {
		t.Fatalf("%s exists on the host before the test", note)
	}
	if r := run(t, s, `echo mine > "$N"`, "N="+note); r.Code != 0 {
		t.Fatalf("write %s: %+v", note, r)
	}
	if got, err := s.ReadText(t.Context(), note); err != nil || got != "mine\n" {
		t.Errorf("ReadText(%s) = %q, %v; want mine", note, got, err)
	}
	if _, err := os.Stat(note); err == nil {
		t.Errorf("%s of the sandbox appeared in the host's /tmp", note)
	}
	if r := run(t, s, `echo "$HOME"; env | grep -c . `); strings.Contains(r.Stdout, home+"\n") {
		t.Errorf("HOME inside = %q; want the private /tmp", r.Stdout)
	}
}

func TestSandboxEscapeLoopback(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from the host\n"))
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	connect := `exec 3<>/dev/tcp/127.0.0.1/$P && cat <&3`
	for _, tt := range []struct {
		network string
		reach   bool
	}{{environment.NetworkNone, false}, {environment.NetworkHost, true}} {
		t.Run(tt.network, func(t *testing.T) {
			t.Parallel()
			s, _ := newSandbox(t, environment.SandboxPolicy{Network: tt.network})
			r := run(t, s, connect, "P="+port)
			got := strings.Contains(r.Stdout, "hello from the host")
			if got != tt.reach {
				t.Errorf("network %q: reached the host's server = %v; want %v (%+v)", tt.network, got, tt.reach, r)
			}
		})
	}
}

func TestSandboxEscapeDaemon(t *testing.T) {
	t.Parallel()
	s, ws := newSandbox(t, environment.SandboxPolicy{})
	lock := filepath.Join(ws, "lock")
	p := envtest.SpawnHolder(t, t.Context(), s, lock, true)
	// The shell exits by itself; its setsid daemon goes with the pid
	// namespace.
	if code, err := envtest.Wait(t, p); code != 0 || err != nil {
		t.Fatalf("shell Wait() = %d, %v; want 0", code, err)
	}
	envtest.WaitUnlocked(t, lock)
}

func TestSandboxEscapeForkBomb(t *testing.T) {
	t.Parallel()
	const limit = 20
	s, _ := newSandbox(t, environment.SandboxPolicy{Processes: limit})
	// Fork children that sleep until fork fails; report how many.
	r := run(t, s, `python3 -c '
import os, time
n = 0
try:
    while n < 10000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print(n, e.errno)
'`)
	var n, errno int
	if _, err := fmt.Sscan(r.Stdout, &n, &errno); err != nil {
		t.Fatalf("fork bomb output %+v: %v", r, err)
	}
	if n >= limit || n < limit-5 {
		t.Errorf("forked %d processes under processes = %d; want the limit to stop it just below", n, limit)
	}
}

func TestSandboxEscapeMemory(t *testing.T) {
	t.Parallel()
	s, _ := newSandbox(t, environment.SandboxPolicy{Memory: 256 << 20})
	alloc := `python3 -c 'import sys; b = bytearray(int(sys.argv[1])); print("allocated")' `
	if r := run(t, s, alloc+strconv.Itoa(64<<20)); r.Stdout != "allocated\n" {
		t.Fatalf("64 MiB under 256 MiB: %+v", r)
	}
	r := run(t, s, alloc+strconv.Itoa(1<<30))
	if r.Code == 0 || strings.Contains(r.Stdout, "allocated") || !strings.Contains(r.Stderr, "MemoryError") {
		t.Errorf("1 GiB under memory = 256MiB: %+v; want a MemoryError", r)
	}
}

func TestSandboxEscapeSymlink(t *testing.T) {
	t.Parallel()
	s, ws := newSandbox(t, environment.SandboxPolicy{})
	outside := t.TempDir()
	path, value := secret(t, outside)
	if err := os.Symlink(path, filepath.Join(ws, "planted")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "dir")); err != nil {
		t.Fatal(err)
	}
	// Inside, the target is simply not there.
	if r := run(t, s, `cat planted; ls dir/`); strings.Contains(r.Stdout, value) || strings.Contains(r.Stdout, filepath.Base(path)) {
		t.Errorf("symlinked secret readable inside: %+v", r)
	}
	// A link the sandboxed code makes itself, for the host-side file tools
	// to follow, is refused too.
	if r := run(t, s, `ln -s "$S" made`, "S="+path); r.Code != 0 {
		t.Fatalf("ln: %+v", r)
	}
	ctx := t.Context()
	for _, name := range []string{"planted", "made", "dir/" + filepath.Base(path)} {
		got, err := s.ReadText(ctx, name)
		if !errors.Is(err, environment.ErrOutsideWorkspace) {
			t.Errorf("ReadText(%s) = %q, %v; want ErrOutsideWorkspace", name, got, err)
		}
	}
	for _, name := range []string{"made", "dir/new"} {
		if err := s.WriteText(ctx, name, "overwritten"); !errors.Is(err, environment.ErrOutsideWorkspace) {
			t.Errorf("WriteText(%s) = %v; want ErrOutsideWorkspace", name, err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != value {
		t.Errorf("outside file changed to %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("WriteText created a file outside through a symlinked directory")
	}
}

func TestSandboxEscapeFileToolsOutside(t *testing.T) {
	t.Parallel()
	ro := t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "ref.txt"), []byte("reference"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := newSandbox(t, environment.SandboxPolicy{ReadOnly: []string{ro}})
	ctx := t.Context()
	outside := t.TempDir()
	path, value := secret(t, outside)
	for _, p := range []string{"/etc/hostname", "/usr/bin/env", "/proc/self/environ"} {
		if _, err := s.ReadText(ctx, p); !errors.Is(err, environment.ErrOutsideWorkspace) {
			t.Errorf("ReadText(%q) = %v; want ErrOutsideWorkspace", p, err)
		}
	}
	for _, p := range []string{"/usr/new", "/etc/passwd", "/new"} {
		if err := s.WriteText(ctx, p, "x"); !errors.Is(err, environment.ErrOutsideWorkspace) {
			t.Errorf("WriteText(%q) = %v; want ErrOutsideWorkspace", p, err)
		}
	}
	// The test's directories are under the host's /tmp, which the tools
	// see as the sandbox sees it: the private /tmp, where they are not.
	for _, p := range []string{path, "../" + filepath.Base(outside) + "/" + filepath.Base(path)} {
		if got, err := s.ReadText(ctx, p); err == nil || strings.Contains(got, value) {
			t.Errorf("ReadText(%q) = %q, %v; want an error", p, got, err)
		}
	}
	for _, p := range []string{filepath.Join(outside, "new"), "../" + filepath.Base(outside) + "/new2"} {
		_ = s.WriteText(ctx, p, "x")
	}
	for _, p := range []string{filepath.Join(outside, "new"), filepath.Join(outside, "new2")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("WriteText created %s on the host", p)
		}
	}
	// read_only paths are readable, not writable, by tools and processes.
	if got, err := s.ReadText(ctx, filepath.Join(ro, "ref.txt")); err != nil || got != "reference" {
		t.Errorf("ReadText in read_only = %q, %v", got, err)
	}
	if err := s.WriteText(ctx, filepath.Join(ro, "ref.txt"), "x"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("WriteText in read_only = %v; want read-only", err)
	}
	if r := run(t, s, `cat "$R/ref.txt" && ! echo x > "$R/ref.txt"`, "R="+ro); r.Code != 0 || r.Stdout != "reference" {
		t.Errorf("read_only inside: %+v", r)
	}
	if _, err := s.Spawn(ctx, environment.Spec{Command: "true", Dir: "/var"}); !errors.Is(err, environment.ErrOutsideWorkspace) {
		t.Errorf("Spawn with Dir outside = %v; want ErrOutsideWorkspace", err)
	}
}

func TestSandboxBadSetup(t *testing.T) {
	t.Parallel()
	testenv.MustHaveBwrap(t)
	ws := t.TempDir()
	for _, tt := range []struct {
		name string
		pol  environment.SandboxPolicy
		want string
	}{
		{"missing bwrap", environment.SandboxPolicy{Bwrap: "/nonexistent/bwrap"}, "sandbox needs bubblewrap"},
		{"bad network", environment.SandboxPolicy{Network: "wifi"}, `sandbox network "wifi"`},
		{"missing read_only", environment.SandboxPolicy{ReadOnly: []string{"/nonexistent/x"}}, "(read_only)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: ws, Policy: tt.pol})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewSandbox(%+v) = %v; want an error containing %q", tt.pol, err, tt.want)
			}
		})
	}
}

// TestSandboxCancelDaemon: cancelling a call whose tree left a setsid
// daemon takes the daemon too.
func TestSandboxCancelDaemon(t *testing.T) {
	t.Parallel()
	s, ws := newSandbox(t, environment.SandboxPolicy{})
	ctx, cancel := context.WithCancel(t.Context())
	lock := filepath.Join(ws, "lock")
	p, err := s.Spawn(ctx, environment.Spec{Command: `setsid -f flock -x "$L" sleep 1000; while ! [ -e "$L" ]; do sleep 0.01; done; sleep 1000`, Env: []string{"L=" + lock}})
	if err != nil {
		t.Fatal(err)
	}
	for !envtest.Locked(t, lock) {
		if !p.Running() {
			t.Fatal("shell ended before the daemon took its lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	envtest.Wait(t, p)
	envtest.WaitUnlocked(t, lock)
}

// TestPythonCachePerOwner: where Python lives is remembered by the
// owner of the sandboxes (a module of one server), not by the process:
// a second owner in the same process asks again and sees its own answer
// (here a virtualenv put first on PATH meanwhile), while the first keeps
// the answer it had. The cache is bounded.
func TestPythonCachePerOwner(t *testing.T) {
	testenv.MustHaveBwrap(t)
	testenv.MustHaveExec(t, "python3", "apt-get install python3")
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command("python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		testenv.Missing(t, fmt.Sprintf("python3 cannot make a virtualenv (apt-get install python3-venv): %v: %s", err, out))
	}
	mk := func(c *environment.PythonCache) string {
		s, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: t.TempDir(), Python: "python3", PythonCache: c})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return s.Python()
	}
	first, second := environment.NewPythonCache(0), environment.NewPythonCache(0)
	before := mk(first)
	t.Setenv("PATH", filepath.Join(venv, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	got := map[string]string{"first owner again": mk(first), "second owner": mk(second), "no cache": mk(nil)}
	want := map[string]string{"first owner again": before, "second owner": filepath.Join(venv, "bin", "python3"), "no cache": filepath.Join(venv, "bin", "python3")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("interpreters (-want +got):\n%s", diff)
	}

	small := environment.NewPythonCache(1)
	mk(small)
	s, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: t.TempDir(), Python: "python3.nonexistent", PythonCache: small})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if n := small.Len(); n != 1 {
		t.Errorf("a cache of size 1 holds %d names", n)
	}
}

// TestSandboxStubDirReadOnly checks that code mode's stub directory
// (AllowPaths) is read-only inside the sandbox for processes and file
// tools alike, also where it lies inside the writable workspace (a
// workspace of ~ holds $BUB_HOME/codemode): a planted file there would
// be Python that a later run picks up (issue 26 item 9). A read_only
// path inside the workspace is read-only for processes as well.
func TestSandboxStubDirReadOnly(t *testing.T) {
	t.Parallel()
	testenv.MustHaveBwrap(t)
	ws, outside := t.TempDir(), t.TempDir()
	inside := filepath.Join(ws, ".bub", "codemode")
	for _, d := range []string{inside, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "tools.pyi"), []byte("stub"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ro := filepath.Join(ws, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	// A stub directory that does not exist yet when the sandbox is made
	// must not be made (and planted in) first by a process.
	later := filepath.Join(ws, ".bub2", "codemode")
	s, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: ws, AllowPaths: []string{inside, outside, later},
		Policy: environment.SandboxPolicy{ReadOnly: []string{ro}}})
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	for _, d := range []string{inside, outside} {
		if r := run(t, s, `cat "$D/tools.pyi"`, "D="+d); r.Code != 0 || r.Stdout != "stub" {
			t.Errorf("read the stub in %s: %+v", d, r)
		}
		for _, cmd := range []string{`echo x > "$D/planted.py"`, `echo x > "$D/tools.pyi"`, `mkdir "$D/s"`} {
			if r := run(t, s, cmd, "D="+d); r.Code == 0 {
				t.Errorf("%s with D=%s: exit 0; want a failure", cmd, d)
			}
		}
		if err := s.WriteText(t.Context(), filepath.Join(d, "planted.py"), "x"); !errors.Is(err, environment.ErrReadOnly) {
			t.Errorf("WriteText in %s = %v; want ErrReadOnly", d, err)
		}
		for _, p := range []string{"planted.py", "s"} {
			if _, err := os.Lstat(filepath.Join(d, p)); err == nil {
				t.Errorf("%s was created in %s from inside the sandbox", p, d)
			}
		}
		if b, err := os.ReadFile(filepath.Join(d, "tools.pyi")); err != nil || string(b) != "stub" {
			t.Errorf("the stub in %s = %q, %v", d, b, err)
		}
	}
	if r := run(t, s, `mkdir -p "$D" && echo x > "$D/planted.py"`, "D="+later); r.Code == 0 {
		t.Errorf("plant in a stub directory made after the sandbox: exit 0; want a failure")
	}
	if _, err := os.Lstat(filepath.Join(later, "planted.py")); err == nil {
		t.Errorf("planted.py was created in %s from inside the sandbox", later)
	}
	// A read_only path inside the workspace is read-only too.
	if r := run(t, s, `echo x > "$R/planted"`, "R="+ro); r.Code == 0 {
		t.Errorf("write in a read_only path inside the workspace: exit 0; want a failure")
	}
	if _, err := os.Lstat(filepath.Join(ro, "planted")); err == nil {
		t.Errorf("a file was created in the read_only path %s", ro)
	}
	// The rest of the workspace stays writable.
	if r := run(t, s, `echo x > "$W/.bub/ok.txt"`, "W="+ws); r.Code != 0 {
		t.Errorf("write beside the stub directory: %+v", r)
	}
}
