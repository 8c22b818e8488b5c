package environment

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// confineFixture lays out
//
//	root/ws/            the workspace
//	root/ws/sub/
//	root/ws/in      ->  sub          (stays inside)
//	root/ws/esc     ->  ../out       (escapes, relative)
//	root/ws/escabs  ->  root/out     (escapes, absolute)
//	root/ws/dangle  ->  root/out/new (escapes to a file not yet there)
//	root/ws/loop    ->  loop
//	root/out/
//	root/stubs/         an allowed extra root
func confineFixture(t *testing.T) (root, ws string) {
	t.Helper()
	root = t.TempDir()
	ws = filepath.Join(root, "ws")
	for _, d := range []string{"ws/sub", "out", "stubs"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"in":     "sub",
		"esc":    "../out",
		"escabs": filepath.Join(root, "out"),
		"dangle": filepath.Join(root, "out", "new"),
		"loop":   "loop",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, ws
}

func TestResolvePath(t *testing.T) {
	t.Parallel()
	root, ws := confineFixture(t)
	confined := newTestEnv(t, &LocalOptions{Workspace: ws, Confine: true, AllowPaths: []string{filepath.Join(root, "stubs")}})
	open := newTestEnv(t, &LocalOptions{Workspace: ws})

	tests := []struct {
		name    string
		path    string
		want    string // for both environments unless wantOpen is set
		wantErr error  // confined only
	}{
		{name: "relative", path: "a.txt", want: ws + "/a.txt"},
		{name: "dot dot inside", path: "sub/../a.txt", want: ws + "/a.txt"},
		{name: "empty is workspace", path: "", want: ws},
		{name: "workspace itself", path: ws, want: ws},
		{name: "symlink inside", path: "in/new/deep.txt", want: ws + "/in/new/deep.txt"},
		{name: "allowed extra root", path: root + "/stubs/tools.pyi", want: root + "/stubs/tools.pyi"},
		{name: "dot dot outside", path: "../out/x", want: root + "/out/x", wantErr: ErrOutsideWorkspace},
		{name: "dot dot via subdir", path: "sub/../../out", want: root + "/out", wantErr: ErrOutsideWorkspace},
		{name: "missing then dot dot", path: "missing/../../out", want: root + "/out", wantErr: ErrOutsideWorkspace},
		{name: "relative symlink escapes", path: "esc/x", want: ws + "/esc/x", wantErr: ErrOutsideWorkspace},
		{name: "absolute symlink escapes", path: "escabs", want: ws + "/escabs", wantErr: ErrOutsideWorkspace},
		{name: "dangling symlink escapes", path: "dangle", want: ws + "/dangle", wantErr: ErrOutsideWorkspace},
		{name: "absolute outside", path: "/etc/passwd", want: "/etc/passwd", wantErr: ErrOutsideWorkspace},
		{name: "prefix is not containment", path: ws + "x/a", want: ws + "x/a", wantErr: ErrOutsideWorkspace},
		{name: "symlink loop", path: "loop/x", want: ws + "/loop/x", wantErr: syscall.ELOOP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := open.ResolvePath(tt.path)
			if err != nil || got != tt.want {
				t.Errorf("unconfined ResolvePath(%q) = %q, %v; want %q, nil", tt.path, got, err, tt.want)
			}
			got, err = confined.ResolvePath(tt.path)
			if tt.wantErr == nil {
				if err != nil || got != tt.want {
					t.Errorf("confined ResolvePath(%q) = %q, %v; want %q, nil", tt.path, got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("confined ResolvePath(%q) = %q, %v; want error %v", tt.path, got, err, tt.wantErr)
			}
		})
	}

	_, err := confined.ResolvePath("../x")
	if want := `environment: path "../x" resolves outside the workspace ` + ws; err == nil || err.Error() != want {
		t.Errorf("ResolvePath(../x) error = %v; want %q", err, want)
	}
	if _, err := confined.ResolvePath("a\x00b"); err == nil {
		t.Errorf("ResolvePath with NUL succeeded; want error")
	}
}

// TestResolvePathHome sets HOME, so it cannot run in parallel.
func TestResolvePathHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := t.TempDir()
	tests := []struct {
		path, want string
	}{
		{"~", home},
		{"~/", home},
		{"~/notes/a.md", home + "/notes/a.md"},
		{"~bub-no-such-user/x", ws + "/~bub-no-such-user/x"},
		{"a/~/b", ws + "/a/~/b"},
	}
	e := newTestEnv(t, &LocalOptions{Workspace: ws})
	for _, tt := range tests {
		if got, err := e.ResolvePath(tt.path); err != nil || got != tt.want {
			t.Errorf("ResolvePath(%q) = %q, %v; want %q, nil", tt.path, got, err, tt.want)
		}
	}
	confined := newTestEnv(t, &LocalOptions{Workspace: ws, Confine: true})
	if _, err := confined.ResolvePath("~/x"); !errors.Is(err, ErrOutsideWorkspace) {
		t.Errorf("confined ResolvePath(~/x) = %v; want ErrOutsideWorkspace", err)
	}
	// A workspace given with ~ is expanded too.
	if err := os.Mkdir(filepath.Join(home, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	e2 := newTestEnv(t, &LocalOptions{Workspace: "~/proj"})
	if got, want := e2.Workspace(), filepath.Join(home, "proj"); got != want {
		t.Errorf("Workspace() = %q; want %q", got, want)
	}
}

func TestReadText(t *testing.T) {
	t.Parallel()
	root, ws := confineFixture(t)
	files := map[string]string{
		"ws/text.md":   "héllo\nwörld\n",
		"ws/empty":     "",
		"ws/crlf.txt":  "a\r\nb\r\n",
		"ws/nul.bin":   "PK\x03\x04\x00\x00",
		"ws/latin1":    "caf\xe9\n",
		"ws/big.txt":   strings.Repeat("x", 17),
		"ws/exact.txt": strings.Repeat("y", 16),
		"out/secret":   "no",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, &LocalOptions{Workspace: ws, Confine: true, MaxReadBytes: 16})

	tests := []struct {
		name    string
		path    string
		want    string
		wantIs  error
		wantMsg string
	}{
		{name: "text", path: "text.md", want: "héllo\nwörld\n"},
		{name: "empty", path: "empty", want: ""},
		{name: "line endings kept", path: "crlf.txt", want: "a\r\nb\r\n"},
		{name: "exactly at limit", path: "exact.txt", want: strings.Repeat("y", 16)},
		{name: "missing", path: "nope.txt", wantIs: fs.ErrNotExist, wantMsg: "environment: no such file: " + ws + "/nope.txt"},
		{name: "parent is a file", path: "text.md/x", wantMsg: "environment: no such file: " + ws + "/text.md/x (a parent is not a directory)"},
		{name: "directory", path: "sub", wantIs: ErrIsDir, wantMsg: "environment: " + ws + "/sub is a directory"},
		{name: "NUL byte", path: "nul.bin", wantIs: ErrBinary, wantMsg: "environment: " + ws + "/nul.bin is a binary file (NUL byte at offset 4), not text"},
		{name: "invalid UTF-8", path: "latin1", wantIs: ErrBinary, wantMsg: "environment: " + ws + "/latin1 is a binary file (invalid UTF-8 at offset 3), not text"},
		{name: "too large", path: "big.txt", wantIs: ErrTooLarge, wantMsg: "environment: " + ws + "/big.txt is too large to read (17 bytes; the limit is 16 bytes)"},
		{name: "fifo", path: "fifo", wantMsg: "environment: " + ws + "/fifo is not a regular file"},
		{name: "outside", path: "../out/secret", wantIs: ErrOutsideWorkspace},
		{name: "outside via symlink", path: "esc/secret", wantIs: ErrOutsideWorkspace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.ReadText(t.Context(), tt.path)
			if tt.wantIs == nil && tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("ReadText(%q): %v", tt.path, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("ReadText(%q) mismatch (-want +got):\n%s", tt.path, diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("ReadText(%q) = %q; want error", tt.path, got)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("ReadText(%q) = %v; want errors.Is %v", tt.path, err, tt.wantIs)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("ReadText(%q) error = %q; want %q", tt.path, err, tt.wantMsg)
			}
		})
	}

	// /proc files claim size 0; the limit must hold on what is read.
	if _, err := os.Stat("/proc/self/environ"); err == nil {
		unconfined := newTestEnv(t, &LocalOptions{Workspace: ws, MaxReadBytes: 1})
		if _, err := unconfined.ReadText(t.Context(), "/proc/self/status"); !errors.Is(err, ErrTooLarge) {
			t.Errorf("ReadText(/proc/self/status) with 1-byte limit = %v; want ErrTooLarge", err)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.ReadText(ctx, "text.md"); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadText(cancelled) = %v; want context.Canceled", err)
	}
}

func TestReadTextDefaultLimit(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	big := filepath.Join(e.Workspace(), "big")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, DefaultMaxReadBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ReadText(t.Context(), "big"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadText of a %d-byte file = %v; want ErrTooLarge", DefaultMaxReadBytes+1, err)
	}
}

func TestWriteText(t *testing.T) {
	t.Parallel()
	root, ws := confineFixture(t)
	if err := os.WriteFile(filepath.Join(ws, "file"), []byte("old content"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Read-only roots (code mode's stub directory): one beside the
	// workspace, reachable through a symlink too, and one inside it.
	if err := os.Mkdir(filepath.Join(ws, "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "stubs"), filepath.Join(ws, "tostubs")); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, &LocalOptions{Workspace: ws, Confine: true, AllowPaths: []string{filepath.Join(root, "stubs"), filepath.Join(ws, "ro")}})

	tests := []struct {
		name     string
		path     string
		content  string
		wantFile string // where the content lands; empty when an error is wanted
		wantIs   error
		wantMsg  string
	}{
		{name: "creates parents", path: "a/b/c.txt", content: "deep\n", wantFile: ws + "/a/b/c.txt"},
		{name: "through inside symlink", path: "in/x.txt", content: "x", wantFile: ws + "/sub/x.txt"},
		{name: "replaces shorter", path: "file", content: "new", wantFile: ws + "/file"},
		{name: "empty content", path: "empty", content: "", wantFile: ws + "/empty"},
		{name: "directory", path: "sub", content: "x", wantIs: ErrIsDir, wantMsg: "environment: " + ws + "/sub is a directory"},
		{name: "parent is a file", path: "file/x", content: "x"},
		{name: "outside", path: "../out/x", content: "x", wantIs: ErrOutsideWorkspace},
		{name: "dangling symlink outside", path: "dangle", content: "x", wantIs: ErrOutsideWorkspace},
		{name: "read-only root", path: root + "/stubs/tools.pyi", content: "x", wantIs: ErrReadOnly,
			wantMsg: `environment: path "` + root + `/stubs/tools.pyi" is read-only: ` + root + `/stubs may be read but not written by file tools`},
		{name: "read-only root, new subdirectory", path: root + "/stubs/s/planted.py", content: "x", wantIs: ErrReadOnly},
		{name: "read-only root through a symlink", path: "tostubs/planted.py", content: "x", wantIs: ErrReadOnly},
		{name: "read-only root inside the workspace", path: "ro/planted.py", content: "x", wantIs: ErrReadOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.WriteText(t.Context(), tt.path, tt.content)
			if tt.wantFile == "" {
				if err == nil {
					t.Fatalf("WriteText(%q) succeeded; want error", tt.path)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("WriteText(%q) = %v; want errors.Is %v", tt.path, err, tt.wantIs)
				}
				if tt.wantMsg != "" && err.Error() != tt.wantMsg {
					t.Errorf("WriteText(%q) error = %q; want %q", tt.path, err, tt.wantMsg)
				}
				if !strings.HasPrefix(err.Error(), "environment: ") {
					t.Errorf("error %q lacks the environment: prefix", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("WriteText(%q): %v", tt.path, err)
			}
			b, err := os.ReadFile(tt.wantFile)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.content, string(b)); diff != "" {
				t.Errorf("file %s mismatch (-want +got):\n%s", tt.wantFile, diff)
			}
			got, err := e.ReadText(t.Context(), tt.path)
			if err != nil || got != tt.content {
				t.Errorf("ReadText after WriteText(%q) = %q, %v; want %q", tt.path, got, err, tt.content)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(root, "out", "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dangling symlink target was created (stat: %v)", err)
	}
	for _, p := range []string{"stubs/tools.pyi", "stubs/s", "stubs/planted.py", "ws/ro/planted.py"} {
		if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created in a read-only root (stat: %v)", p, err)
		}
	}
	fi, err := os.Stat(filepath.Join(ws, "file"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("rewritten file mode = %v; want 0600 kept", fi.Mode().Perm())
	}
}

func TestNewLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    LocalOptions
		wantErr string
	}{
		{name: "missing workspace", opts: LocalOptions{Workspace: filepath.Join(dir, "nope")}, wantErr: "environment: workspace: stat " + dir + "/nope: no such file or directory"},
		{name: "workspace is a file", opts: LocalOptions{Workspace: file}, wantErr: "environment: workspace " + file + " is not a directory"},
		{name: "bad extra env", opts: LocalOptions{Workspace: dir, ExtraEnv: []string{"=x"}}, wantErr: `environment: env entry "=x" is not KEY=VALUE`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewLocal(&tt.opts)
			if err == nil {
				e.Close()
				t.Fatalf("NewLocal(%+v) succeeded; want error", tt.opts)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("NewLocal(%+v) = %q; want %q", tt.opts, err, tt.wantErr)
			}
		})
	}

	e, err := NewLocal(nil)
	if err != nil {
		t.Fatalf("NewLocal(nil): %v", err)
	}
	defer e.Close()
	wd, _ := os.Getwd()
	if e.Workspace() != wd || e.Python() != "python3" {
		t.Errorf("NewLocal(nil) workspace, python = %q, %q; want %q, python3", e.Workspace(), e.Python(), wd)
	}
}

func TestRegistered(t *testing.T) {
	t.Parallel()
	if got := Names(); !slices.Contains(got, DefaultName) {
		t.Fatalf("Names() = %v; want it to contain %q", got, DefaultName)
	}
	f, err := Lookup(DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	env, err := f(t.Context(), Options{Session: "s1", Workspace: ws, Python: "py"})
	if err != nil {
		t.Fatalf("local factory: %v", err)
	}
	defer env.Close()
	if env.Workspace() != ws || PythonOf(env) != "py" {
		t.Errorf("local factory workspace, python = %q, %q; want %q, py", env.Workspace(), PythonOf(env), ws)
	}
	_, err = Lookup("nope")
	if want := `environment: unknown environment "nope" (registered: `; err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "; forgotten import?)") {
		t.Errorf("Lookup(nope) = %v; want %q...", err, want)
	}
}

func TestRegisterPanics(t *testing.T) {
	t.Parallel()
	f := func(context.Context, Options) (Environment, error) { return nil, nil }
	for _, tt := range []struct {
		name string
		f    Factory
	}{{"", f}, {"x-nil", nil}, {DefaultName, f}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", tt.name)
				}
			}()
			Register(tt.name, tt.f)
		}()
	}
}
