package environment_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/testenv"
)

// homeFixture lays out a server home inside a workspace, as the default
// ~/.bub under a workspace of ~ has it:
//
//	ws/.bub/bub.toml             a secret
//	ws/.bub/audit/audit.jsonl    the audit log
//	ws/.bub/codemode/tools.pyi   code mode's stub (an AllowPath)
//	ws/sub/
//	ws/toml     -> .bub/bub.toml       (relative symlinks, which
//	ws/homelink -> .bub                 os.Root alone would follow)
//	ws/sub/up   -> ../.bub/audit
//	ws/abs      -> ws/.bub/bub.toml    (absolute)
func homeFixture(t *testing.T) (ws, home, secret string) {
	t.Helper()
	ws = t.TempDir()
	home = filepath.Join(ws, ".bub")
	secret = "state_key = \"s3cret-" + filepath.Base(ws) + "\"\n"
	files := map[string]string{
		"bub.toml":           secret,
		"audit/audit.jsonl":  "{\"n\":1}\n",
		"codemode/tools.pyi": "stub",
	}
	for name, content := range files {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"toml": ".bub/bub.toml", "homelink": ".bub", "sub/up": "../.bub/audit",
		"abs": filepath.Join(home, "bub.toml")} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	return ws, home, secret
}

// hiddenPaths are ways to name the fixture's home from a tool, each of
// which must be refused.
func hiddenPaths(home string) []string {
	return []string{
		home + "/bub.toml",
		home,
		".bub/bub.toml",
		"sub/../.bub/audit/audit.jsonl",
		"toml",
		"homelink/bub.toml",
		"sub/up/audit.jsonl",
		"abs",
	}
}

// checkHomeIntact fails the test when the fixture's home was changed.
func checkHomeIntact(t *testing.T, home, secret string) {
	t.Helper()
	for name, want := range map[string]string{"bub.toml": secret, "audit/audit.jsonl": "{\"n\":1}\n", "codemode/tools.pyi": "stub"} {
		if b, err := os.ReadFile(filepath.Join(home, name)); err != nil || string(b) != want {
			t.Errorf("%s after the attempts = %q, %v; want %q", name, b, err, want)
		}
	}
	for _, name := range []string{"new.txt", "newdir", "codemode/planted.py", "audit/new.txt"} {
		if _, err := os.Lstat(filepath.Join(home, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created in the home (stat: %v)", name, err)
		}
	}
}

// checkHiddenFiles runs the file operations every confining environment
// must refuse beneath the hidden home, and the ones it must still allow
// in code mode's stub directory.
func checkHiddenFiles(t *testing.T, e environment.Environment, ws, home, secret string) {
	t.Helper()
	ctx := t.Context()
	refused := func(op, p string, err error) {
		t.Helper()
		if !errors.Is(err, environment.ErrOutsideWorkspace) {
			t.Errorf("%s(%q) = %v; want ErrOutsideWorkspace", op, p, err)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s(%q) error carries the secret: %v", op, p, err)
		}
	}
	for _, p := range hiddenPaths(home) {
		got, err := e.ReadText(ctx, p)
		refused("ReadText", p, err)
		if strings.Contains(got, "s3cret") {
			t.Errorf("ReadText(%q) read the secret", p)
		}
		if f, err := e.(environment.FileOpener).OpenFile(ctx, p); err == nil {
			f.Close()
			t.Errorf("OpenFile(%q) succeeded; want ErrOutsideWorkspace", p)
		}
		if p != home {
			refused("WriteText", p, e.WriteText(ctx, p, "overwritten"))
		}
	}
	for _, p := range []string{home + "/new.txt", "homelink/newdir/x.txt", "sub/up/new.txt"} {
		refused("WriteText", p, e.WriteText(ctx, p, "x"))
	}
	if _, err := e.Spawn(ctx, environment.Spec{Argv: []string{"true"}, Dir: home}); !errors.Is(err, environment.ErrOutsideWorkspace) {
		t.Errorf("Spawn in %s = %v; want ErrOutsideWorkspace", home, err)
	}

	// fs.grep and fs.glob walk a Tree: the home is not in it.
	tree, err := e.(environment.TreeReader).OpenTree(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	var walked []string
	if err := fs.WalkDir(tree, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		walked = append(walked, p)
		return nil
	}); err != nil {
		t.Errorf("walk the workspace: %v", err)
	}
	for _, p := range walked {
		if p == ".bub" || strings.HasPrefix(p, ".bub/") {
			t.Errorf("the walk of the workspace reached %s", p)
		}
	}
	for _, p := range []string{"toml", ".bub/bub.toml", "homelink/bub.toml", "sub/up/audit.jsonl"} {
		if b, err := fs.ReadFile(tree, p); !errors.Is(err, environment.ErrOutsideWorkspace) {
			t.Errorf("tree: read %s = %q, %v; want ErrOutsideWorkspace", p, b, err)
		}
		if _, err := fs.Stat(tree, p); !errors.Is(err, environment.ErrOutsideWorkspace) {
			t.Errorf("tree: stat %s = %v; want ErrOutsideWorkspace", p, err)
		}
	}
	if _, err := fs.ReadDir(tree, "homelink"); !errors.Is(err, environment.ErrOutsideWorkspace) {
		t.Errorf("tree: list homelink = %v; want ErrOutsideWorkspace", err)
	}

	// Code mode's stub directory inside the home stays readable, and
	// only readable.
	for _, p := range []string{home + "/codemode/tools.pyi", ".bub/codemode/tools.pyi"} {
		if got, err := e.ReadText(ctx, p); err != nil || got != "stub" {
			t.Errorf("ReadText(%q) = %q, %v; want the stub", p, got, err)
		}
	}
	if err := e.WriteText(ctx, home+"/codemode/planted.py", "x"); !errors.Is(err, environment.ErrReadOnly) {
		t.Errorf("WriteText in the stub directory = %v; want ErrReadOnly", err)
	}
	stubs, err := e.(environment.TreeReader).OpenTree(home + "/codemode")
	if err != nil {
		t.Fatalf("OpenTree of the stub directory: %v", err)
	}
	defer stubs.Close()
	if b, err := fs.ReadFile(stubs, "tools.pyi"); err != nil || string(b) != "stub" {
		t.Errorf("tree of the stub directory: tools.pyi = %q, %v", b, err)
	}
	// The rest of the workspace is as it was.
	if err := e.WriteText(ctx, "sub/ok.txt", "ok"); err != nil {
		t.Errorf("WriteText in the workspace: %v", err)
	}
	if got, err := e.ReadText(ctx, "sub/ok.txt"); err != nil || got != "ok" {
		t.Errorf("ReadText in the workspace = %q, %v", got, err)
	}
}

// TestLocalConfinedHidesHome: with Confine, the local environment's file
// operations cannot reach a hidden root inside the workspace (the
// server's home under a workspace of ~), by any path, while code mode's
// stub directory inside it stays readable.
func TestLocalConfinedHidesHome(t *testing.T) {
	t.Parallel()
	ws, home, secret := homeFixture(t)
	e, err := environment.NewLocal(&environment.LocalOptions{Workspace: ws, Confine: true,
		AllowPaths: []string{home + "/codemode"}, Hidden: []string{home}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	checkHiddenFiles(t, e, ws, home, secret)
	checkHomeIntact(t, home, secret)

	// Unconfined, the local environment reaches everything, by design.
	open, err := environment.NewLocal(&environment.LocalOptions{Workspace: ws, Hidden: []string{home}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open.Close() })
	if got, err := open.ReadText(t.Context(), ".bub/bub.toml"); err != nil || got != secret {
		t.Errorf("unconfined ReadText of the home = %q, %v; want it read", got, err)
	}
}

// TestSandboxHidesHome: a hidden root inside the workspace is out of
// reach of the sandbox's processes (they see an empty, read-only
// directory, with code mode's stub directory readable inside) and of its
// file operations, also through symlinks a process plants.
func TestSandboxHidesHome(t *testing.T) {
	t.Parallel()
	testenv.MustHaveBwrap(t)
	ws, home, secret := homeFixture(t)
	s, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: ws,
		AllowPaths: []string{home + "/codemode"}, Hidden: []string{home}})
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	checkHiddenFiles(t, s, ws, home, secret)

	for _, cmd := range []string{
		`cat "$H/bub.toml"`,
		`cat "$W/toml"`,
		`grep -r s3cret "$W"`,
		`rm "$H/audit/audit.jsonl"`,
		`: > "$H/audit/audit.jsonl"`,
		`echo x > "$H/bub.toml"`,
		`rm -rf "$H"`,
		`mv "$H" "$W/moved"`,
		`echo x > "$H/new.txt"`,
		`echo x > "$H/codemode/planted.py"`,
	} {
		r := run(t, s, cmd, "H="+home, "W="+ws)
		if r.Code == 0 {
			t.Errorf("%s: exit 0; want a failure", cmd)
		}
		if strings.Contains(r.Stdout+r.Stderr, "s3cret") {
			t.Errorf("%s: the secret came out: %+v", cmd, r)
		}
	}
	if r := run(t, s, `ls -A "$H"`, "H="+home); r.Code != 0 || r.Stdout != "codemode\n" {
		t.Errorf("ls -A of the home inside = %+v; want only codemode", r)
	}
	if r := run(t, s, `cat "$H/codemode/tools.pyi"`, "H="+home); r.Code != 0 || r.Stdout != "stub" {
		t.Errorf("read the stub inside = %+v", r)
	}
	// A symlink planted by a process does not lead the file operations
	// in either.
	if r := run(t, s, `ln -s .bub/bub.toml "$W/planted" && ln -s ../.bub "$W/sub/planteddir"`, "W="+ws); r.Code != 0 {
		t.Fatalf("plant symlinks: %+v", r)
	}
	for _, p := range []string{"planted", "sub/planteddir/bub.toml", "sub/planteddir/audit/audit.jsonl"} {
		if got, err := s.ReadText(t.Context(), p); !errors.Is(err, environment.ErrOutsideWorkspace) {
			t.Errorf("ReadText(%q) through a planted symlink = %q, %v; want ErrOutsideWorkspace", p, got, err)
		}
		if err := s.WriteText(t.Context(), p, "x"); !errors.Is(err, environment.ErrOutsideWorkspace) {
			t.Errorf("WriteText(%q) through a planted symlink = %v; want ErrOutsideWorkspace", p, err)
		}
	}
	checkHomeIntact(t, home, secret)
}

// TestSandboxHidesHomeInReadWrite: a hidden root inside a read_write path
// (not the workspace) is covered too.
func TestSandboxHidesHomeInReadWrite(t *testing.T) {
	t.Parallel()
	testenv.MustHaveBwrap(t)
	_, home, secret := homeFixture(t)
	rw := filepath.Dir(home)
	s, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: t.TempDir(), Hidden: []string{home},
		Policy: environment.SandboxPolicy{ReadWrite: []string{rw}}})
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if r := run(t, s, `cat "$H/bub.toml"; rm -f "$H/audit/audit.jsonl"; echo x > "$R/ok"`, "H="+home, "R="+rw); strings.Contains(r.Stdout, "s3cret") {
		t.Errorf("the secret came out: %+v", r)
	}
	if _, err := s.ReadText(t.Context(), home+"/bub.toml"); !errors.Is(err, environment.ErrOutsideWorkspace) {
		t.Errorf("ReadText of the home in a read_write path = %v; want ErrOutsideWorkspace", err)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "ok")); err != nil || string(b) != "x\n" {
		t.Errorf("the read_write path beside the home is not writable: %q, %v", b, err)
	}
	checkHomeIntact(t, home, secret)
}

// TestSandboxHiddenRootStaysPut: a process cannot move the directories
// that hold a hidden root deeper in the workspace: its content would stay
// covered, but the server would no longer find its home.
func TestSandboxHiddenRootStaysPut(t *testing.T) {
	t.Parallel()
	testenv.MustHaveBwrap(t)
	ws := t.TempDir()
	home := filepath.Join(ws, "a", "b", "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "bub.toml"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: ws, Hidden: []string{home}})
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	for _, cmd := range []string{`mv "$W/a" "$W/moved"`, `mv "$W/a/b" "$W/a/c"`, `mv "$W/a/b/home" "$W/h"`} {
		if r := run(t, s, cmd, "W="+ws); r.Code == 0 {
			t.Errorf("%s: exit 0; want a failure", cmd)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, "bub.toml")); err != nil || string(b) != "secret" {
		t.Errorf("bub.toml after the attempts = %q, %v", b, err)
	}
	// The directories around it stay writable.
	if r := run(t, s, `echo x > "$W/a/b/ok" && mkdir "$W/a/d"`, "W="+ws); r.Code != 0 {
		t.Errorf("write beside the hidden root: %+v", r)
	}
}

// TestWorkspaceInsideHiddenRoot: a workspace inside a hidden root stays
// usable (a path is decided by its innermost root); the rest of the
// hidden root stays out of reach.
func TestWorkspaceInsideHiddenRoot(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ws := filepath.Join(home, "work")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "bub.toml"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	envs := map[string]func() (environment.Environment, error){
		"local": func() (environment.Environment, error) {
			return environment.NewLocal(&environment.LocalOptions{Workspace: ws, Confine: true, Hidden: []string{home}})
		},
		"sandbox": func() (environment.Environment, error) {
			testenv.MustHaveBwrap(t)
			return environment.NewSandbox(&environment.SandboxOptions{Workspace: ws, Hidden: []string{home}})
		},
	}
	for name, mk := range envs {
		e, err := mk()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() { e.Close() })
		if err := e.WriteText(t.Context(), "a/note.txt", "hi"); err != nil {
			t.Errorf("%s: WriteText in the workspace: %v", name, err)
		}
		if got, err := e.ReadText(t.Context(), "a/note.txt"); err != nil || got != "hi" {
			t.Errorf("%s: ReadText in the workspace = %q, %v", name, got, err)
		}
		// (In the sandbox, a path under /tmp is its private /tmp: no
		// such file there.)
		if got, err := e.ReadText(t.Context(), "../bub.toml"); err == nil || got == "secret" {
			t.Errorf("%s: ReadText of the hidden root beside the workspace = %q, %v; want a refusal", name, got, err)
		}
	}
}
