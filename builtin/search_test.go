package builtin

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// engines are the fs.grep engines compared: the Go walker always, and
// ripgrep when it is installed (requireRipgrep).
var engines = []struct{ name, rg string }{{"walker", ""}, {"ripgrep", DefaultRipgrep}}

// requireRipgrep fails the test when rg is missing and CI=true (make
// test installs it as root, so CI compares both engines), and skips it
// otherwise: ripgrep is optional for users, the walker runs without it.
func requireRipgrep(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath(DefaultRipgrep); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("ripgrep (rg) is not installed; make test installs it as root (apt-get install -y ripgrep), and CI must compare it with the Go walker")
	}
	t.Skip("ripgrep (rg) is not installed, so it cannot be compared with the Go walker; install it (apt-get install -y ripgrep) or run make test as root")
}

// grepWith calls fs.grep built with the ripgrep command rg ("" for the
// walker only) in the fixture's environment.
func (f *fixture) grepWith(rg string, args map[string]any) registry.Result {
	f.t.Helper()
	reg := registry.New()
	if err := reg.Register(fsGrepTool(rg)); err != nil {
		f.t.Fatal(err)
	}
	exec := registry.NewExecutor(reg, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
	saved := f.exec
	f.exec = exec
	defer func() { f.exec = saved }()
	return f.call("fs.grep", args)
}

// writeTree writes files (path → content) under the fixture's workspace.
func (f *fixture) writeTree(files map[string]string) {
	f.t.Helper()
	for name, content := range files {
		f.write(name, content)
	}
}

// searchTree exercises nested .gitignore files, negation, directory and
// anchored patterns, hidden and binary files and .git.
var searchTree = map[string]string{
	".gitignore":        "# build output\n*.log\nbuild/\n!keep.log\n/rootonly.txt\nsecret.txt\n",
	"a.go":              "package a\n\nfunc Hello() {}\n// hello world\n",
	"b.txt":             "Hello there\nnothing\nhello again\n",
	"keep.log":          "hello log kept\n",
	"x.log":             "hello ignored log\n",
	"rootonly.txt":      "hello root\n",
	"build/out.txt":     "hello build\n",
	"sub/.gitignore":    "*.tmp\n!x.log\ndeep/\n",
	"sub/rootonly.txt":  "hello sub root\n",
	"sub/c.go":          "hello from sub\nline2\nline3\nhello end\nline5\nline6\nline7\nhello last\n",
	"sub/x.log":         "hello sub log\n",
	"sub/y.tmp":         "hello tmp\n",
	"sub/secret.txt":    "hello secret\n",
	"sub/deep/d.txt":    "hello deep\n",
	"docs/a/b/c.md":     "# hello md\n",
	"docs.txt":          "hello docs\n",
	".hidden/h.txt":     "hello hidden\n",
	".env":              "hello=env\n",
	".git/config":       "hello git\n",
	"bin.dat":           "hello\x00binary\n",
	"late.bin":          "hello before a late NUL\n" + strings.Repeat("x", 200<<10) + "\x00\n",
	"crlf.txt":          "hello crlf\r\nbye\r\n",
	"notes/unicode.txt": "naïve hello café\n",
}

// grepCases run on searchTree; WS in want is the workspace.
var grepCases = []struct {
	name string
	args map[string]any
	want string
}{
	{"files by default", map[string]any{"pattern": "hello"},
		"a.go\nb.txt\ncrlf.txt\ndocs/a/b/c.md\ndocs.txt\nkeep.log\nnotes/unicode.txt\nsub/c.go\nsub/rootonly.txt\nsub/x.log"},
	{"count ignoring case", map[string]any{"pattern": "HELLO", "ignore_case": true, "output_mode": "count"},
		"a.go:2\nb.txt:2\ncrlf.txt:1\ndocs/a/b/c.md:1\ndocs.txt:1\nkeep.log:1\nnotes/unicode.txt:1\nsub/c.go:3\nsub/rootonly.txt:1\nsub/x.log:1"},
	{"content with context", map[string]any{"pattern": "^hello", "path": "sub", "glob": "*.go", "output_mode": "content", "context": 1},
		"sub/c.go:1:hello from sub\nsub/c.go-2-line2\nsub/c.go-3-line3\nsub/c.go:4:hello end\nsub/c.go-5-line5\n--\nsub/c.go-7-line7\nsub/c.go:8:hello last"},
	{"after context only", map[string]any{"pattern": "hello (from|end)", "path": "sub/", "output_mode": "content", "after": 1},
		"sub/c.go:1:hello from sub\nsub/c.go-2-line2\n--\nsub/c.go:4:hello end\nsub/c.go-5-line5"},
	{"context across files", map[string]any{"pattern": "again|there", "output_mode": "content", "before": 1},
		"b.txt:1:Hello there\nb.txt-2-nothing\nb.txt:3:hello again"},
	{"glob by name", map[string]any{"pattern": "hello", "glob": "*.{go,md}"},
		"a.go\ndocs/a/b/c.md\nsub/c.go"},
	{"glob by path", map[string]any{"pattern": "hello", "glob": "sub/*.log"},
		"sub/x.log"},
	{"negated glob", map[string]any{"pattern": "hello", "glob": "!*.txt"},
		"a.go\ndocs/a/b/c.md\nkeep.log\nsub/c.go\nsub/x.log"},
	{"glob does not re-include ignored files", map[string]any{"pattern": "hello", "glob": "*.log"},
		"keep.log\nsub/x.log"},
	{"hidden files, never .git", map[string]any{"pattern": "hello", "hidden": true, "glob": "!*.{go,md,log}"},
		".env\n.hidden/h.txt\nb.txt\ncrlf.txt\ndocs.txt\nnotes/unicode.txt\nsub/rootonly.txt"},
	{"parent .gitignore applies below path", map[string]any{"pattern": "hello", "path": "sub", "output_mode": "count"},
		"sub/c.go:3\nsub/rootonly.txt:1\nsub/x.log:1"},
	{"hidden directory searched when named", map[string]any{"pattern": "hello", "path": ".hidden"},
		".hidden/h.txt"},
	{"literal", map[string]any{"pattern": "Hello()", "literal": true, "output_mode": "content"},
		"a.go:3:func Hello() {}"},
	{"end of line before CR", map[string]any{"pattern": "crlf$", "output_mode": "content"},
		"No matches for \"crlf$\" in WS"},
	{"line text without CR", map[string]any{"pattern": "crlf", "output_mode": "content"},
		"crlf.txt:1:hello crlf"},
	{"non-ASCII text", map[string]any{"pattern": "caf\u00e9$", "output_mode": "content"},
		"notes/unicode.txt:1:naïve hello café"},
	{"limit", map[string]any{"pattern": "hello", "limit": 3},
		"a.go\nb.txt\ncrlf.txt\n[truncated: 7 more files not shown (12 matching lines in 10 files in all); narrow path, glob or pattern, or raise limit]"},
	{"limit in content mode", map[string]any{"pattern": "hello", "path": "sub", "output_mode": "content", "limit": 2, "after": 1},
		"sub/c.go:1:hello from sub\nsub/c.go-2-line2\n--\nsub/c.go:4:hello end\nsub/c.go-5-line5\n[truncated: 3 more matching lines not shown (5 matching lines in 3 files in all); narrow path, glob or pattern, or raise limit]"},
	{"limit within a file", map[string]any{"pattern": "hello", "path": "sub", "glob": "*.go", "output_mode": "content", "limit": 1, "context": 1},
		"sub/c.go:1:hello from sub\nsub/c.go-2-line2\n[truncated: 2 more matching lines not shown (3 matching lines in 1 file in all); narrow path, glob or pattern, or raise limit]"},
	{"no match", map[string]any{"pattern": "zzz+"},
		"No matches for \"zzz+\" in WS"},
}

func TestGrepEngines(t *testing.T) {
	tests := grepCases
	eachEnv(t, func(t *testing.T, f *fixture) {
		f.writeTree(searchTree)
		for _, e := range engines {
			t.Run(e.name, func(t *testing.T) {
				if e.rg != "" {
					requireRipgrep(t)
				}
				for _, tt := range tests {
					res := f.grepWith(e.rg, tt.args)
					if res.Err != nil {
						t.Errorf("%s: %v", tt.name, res.Err)
						continue
					}
					want := strings.ReplaceAll(tt.want, "WS", f.ws)
					if diff := cmp.Diff(want, res.Text); diff != "" {
						t.Errorf("%s: fs.grep(%v) (-want +got):\n%s", tt.name, tt.args, diff)
					}
					r := res.Value.(FSGrepResult)
					if want := e.name; r.Engine != want {
						t.Errorf("%s: engine %q; want %q", tt.name, r.Engine, want)
					}
				}
			})
		}
	})
}

// spawnOnly is an environment that can only do what the Environment
// contract says: no TreeReader, so fs.grep must use ripgrep through
// Spawn and read .gitignore files with ReadText.
type spawnOnly struct{ environment.Environment }

// TestGrepSpawnOnlyEnvironment: on an environment without a tree, fs.grep
// gives the walker's results through ripgrep alone, searches one file
// with ReadText, and fs.glob says it cannot list.
func TestGrepSpawnOnlyEnvironment(t *testing.T) {
	requireRipgrep(t)
	env, err := environment.NewLocal(&environment.LocalOptions{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := newEnvFixture(t, &Module{}, spawnOnly{env})
	f.writeTree(searchTree)
	for _, tt := range grepCases {
		res := f.grepWith(DefaultRipgrep, tt.args)
		if res.Err != nil {
			t.Errorf("%s: %v", tt.name, res.Err)
			continue
		}
		if diff := cmp.Diff(strings.ReplaceAll(tt.want, "WS", f.ws), res.Text); diff != "" {
			t.Errorf("%s: fs.grep(%v) (-want +got):\n%s", tt.name, tt.args, diff)
		}
	}
	if got := f.ok("fs.grep", map[string]any{"pattern": "hello", "path": "x.log", "output_mode": "content"}); got != "x.log:1:hello ignored log" {
		t.Errorf("one file = %q", got)
	}
	if e := f.fails("fs.glob", map[string]any{"pattern": "*"}); e.Kind != registry.KindConfig || !strings.Contains(e.Message, "cannot list directories") {
		t.Errorf("fs.glob = %v %q; want a config error", e.Kind, e.Message)
	}
	if e := f.grepWith("", map[string]any{"pattern": "x"}); e.Err == nil || !strings.Contains(e.Err.Message, "install ripgrep there") {
		t.Errorf("walker-only fs.grep = %+v; want it to ask for ripgrep", e)
	}
}

// TestGrepIgnoreRules runs each .gitignore rule through both engines: a
// tree of files, the rule set, and which files survive. It is the check
// that the Go matcher reads .gitignore as ripgrep does.
func TestGrepIgnoreRules(t *testing.T) {
	files := []string{"a.txt", "b.md", "dir/a.txt", "dir/sub/a.txt", "dir/sub/c.md", "other/dir/x.txt",
		"foo", "x/foo/y.txt", "doc/frotz/z.txt", "a/b/frotz/w.txt", "#hash.txt", "!bang.txt", "sp ace.txt", "lit*.txt", "q1.txt", "q22.txt"}
	tests := []struct {
		name   string
		ignore string
		nested map[string]string // more .gitignore files by directory
		want   []string
	}{
		{"nothing", "", nil, files},
		{"name anywhere", "a.txt\n", nil, except(files, "a.txt", "dir/a.txt", "dir/sub/a.txt")},
		{"anchored", "/a.txt\n", nil, except(files, "a.txt")},
		{"middle slash anchors", "dir/a.txt\n", nil, except(files, "dir/a.txt")},
		{"directory only", "dir/\n", nil, except(files, "dir/a.txt", "dir/sub/a.txt", "dir/sub/c.md", "other/dir/x.txt")},
		{"dir pattern does not match file", "foo/\n", nil, except(files, "x/foo/y.txt")},
		{"star", "*.md\n", nil, except(files, "b.md", "dir/sub/c.md")},
		{"question mark", "q?.txt\n", nil, except(files, "q1.txt")},
		{"class", "[ab].*\n", nil, except(files, "a.txt", "b.md", "dir/a.txt", "dir/sub/a.txt")},
		{"negated class", "q[!1]*.txt\n", nil, except(files, "q22.txt")},
		{"leading double star", "**/frotz\n", nil, except(files, "doc/frotz/z.txt", "a/b/frotz/w.txt")},
		{"inner double star", "dir/**/a.txt\n", nil, except(files, "dir/a.txt", "dir/sub/a.txt")},
		{"trailing double star", "dir/**\n", nil, except(files, "dir/a.txt", "dir/sub/a.txt", "dir/sub/c.md")},
		{"negation", "*.txt\n!a.txt\n", nil, except(files, "other/dir/x.txt", "x/foo/y.txt", "doc/frotz/z.txt", "a/b/frotz/w.txt", "#hash.txt", "!bang.txt", "sp ace.txt", "lit*.txt", "q1.txt", "q22.txt")},
		{"no re-include inside ignored dir", "dir/\n!dir/sub/a.txt\n", nil, except(files, "dir/a.txt", "dir/sub/a.txt", "dir/sub/c.md", "other/dir/x.txt")},
		{"comment and escapes", "# a.txt\n\\#hash.txt\n\\!bang.txt\n", nil, except(files, "#hash.txt", "!bang.txt")},
		{"trailing spaces dropped", "b.md   \n", nil, except(files, "b.md")},
		{"escaped star", "lit\\*.txt\n", nil, except(files, "lit*.txt")},
		{"space in name", "sp ace.txt\n", nil, except(files, "sp ace.txt")},
		{"CRLF lines; a name matches directories too", "b.md\r\nfoo\r\n", nil, except(files, "b.md", "foo", "x/foo/y.txt")},
		{"nested file relative to its dir", "", map[string]string{"dir": "/a.txt\nsub/c.md\n"}, except(files, "dir/a.txt", "dir/sub/c.md")},
		{"nested negation wins", "*.md\n", map[string]string{"dir/sub": "!c.md\n"}, except(files, "b.md")},
		{"nested ignore of parent-kept", "", map[string]string{"other": "x.txt\n"}, except(files, "other/dir/x.txt")},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			if e.rg != "" {
				requireRipgrep(t)
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					f := newFixture(t, nil)
					for _, name := range files {
						f.write(name, "x\n")
					}
					if tt.ignore != "" {
						f.write(".gitignore", tt.ignore)
					}
					for dir, text := range tt.nested {
						f.write(dir+"/.gitignore", text)
					}
					res := f.grepWith(e.rg, map[string]any{"pattern": "x", "limit": 1000})
					if res.Err != nil {
						t.Fatal(res.Err)
					}
					var got []string
					for _, fl := range res.Value.(FSGrepResult).Files {
						got = append(got, fl.Path)
					}
					if diff := cmp.Diff(sorted(tt.want), got); diff != "" {
						t.Errorf("ignore %q %v (-want +got):\n%s", tt.ignore, tt.nested, diff)
					}
				})
			}
		})
	}
}

// except returns files without the given ones.
func except(files []string, drop ...string) []string {
	var out []string
	for _, f := range files {
		keep := true
		for _, d := range drop {
			keep = keep && f != d
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}

// sorted returns paths in walk order.
func sorted(paths []string) []string {
	out := append([]string(nil), paths...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if comparePaths(out[j], out[i]) < 0 {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestGrepCancelled: a cancelled call fails, with no partial result.
func TestGrepCancelled(t *testing.T) {
	f := newFixture(t, nil)
	f.write("a.txt", "hello\n")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := f.callCtx(ctx, "fs.grep", map[string]any{"pattern": "hello"})
	if res.Err == nil || !strings.Contains(res.Err.Message, "cancelled") || res.Value != nil {
		t.Errorf("cancelled fs.grep = %v, %v; want it cancelled, without a result", res.Err, res.Value)
	}
}

func TestGrepRefusals(t *testing.T) {
	f := newFixture(t, nil)
	f.write("a.txt", "x\n")
	tests := []struct {
		name string
		args map[string]any
		kind registry.Kind
		want string
	}{
		{"empty pattern", map[string]any{"pattern": ""}, registry.KindInvalidInput, "`pattern` must not be empty"},
		{"bad regex", map[string]any{"pattern": "a(b"}, registry.KindInvalidInput, `invalid regular expression "a(b": missing closing )`},
		{"look-ahead", map[string]any{"pattern": "a(?=b)"}, registry.KindInvalidInput, "no look-around or backreferences"},
		{"newline", map[string]any{"pattern": `a\nb`}, registry.KindInvalidInput, "matches a line break"},
		{"bad mode", map[string]any{"pattern": "x", "output_mode": "lines"}, registry.KindInvalidInput, "argument validation failed"},
		{"bad glob", map[string]any{"pattern": "x", "glob": "*.{go"}, registry.KindInvalidInput, "is not a valid glob"},
		{"negative limit", map[string]any{"pattern": "x", "limit": -1}, registry.KindInvalidInput, "`limit` must be >= 0"},
		{"huge limit", map[string]any{"pattern": "x", "limit": 5000}, registry.KindInvalidInput, "`limit` must be <= 2000"},
		{"huge context", map[string]any{"pattern": "x", "context": 21}, registry.KindInvalidInput, "`context` must be between 0 and 20"},
		{"missing path", map[string]any{"pattern": "x", "path": "nope"}, registry.KindNotFound, "no such file or directory"},
	}
	for _, tt := range tests {
		e := f.fails("fs.grep", tt.args)
		if e.Kind != tt.kind || !strings.Contains(e.Message, tt.want) {
			t.Errorf("%s: got %v %q; want %v containing %q", tt.name, e.Kind, e.Message, tt.kind, tt.want)
		}
	}
}

// TestGrepSingleFile: a file named as path is searched even when ignored
// or hidden; a binary one or a FIFO (which must not block) finds nothing.
func TestGrepSingleFile(t *testing.T) {
	f := newFixture(t, nil)
	f.writeTree(searchTree)
	if err := syscall.Mkfifo(filepath.Join(f.ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{"fifo", "No matches for \"hello\" in " + filepath.Join(f.ws, "fifo")},
		{"x.log", "x.log:1:hello ignored log"},
		{".env", ".env:1:hello=env"},
		{"bin.dat", "No matches for \"hello\" in " + filepath.Join(f.ws, "bin.dat")},
	} {
		if got := f.ok("fs.grep", map[string]any{"pattern": "hello", "path": tt.path, "output_mode": "content"}); got != tt.want {
			t.Errorf("fs.grep in %s = %q; want %q", tt.path, got, tt.want)
		}
	}
}

// TestGrepCaps: long lines are clipped, the output stays under its cap
// and the note counts what was left out.
func TestGrepCaps(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			if e.rg != "" {
				requireRipgrep(t)
			}
			f := newFixture(t, nil)
			long := "match " + strings.Repeat("é", 1000) + "\n"
			f.write("long.txt", long)
			var many strings.Builder
			for range 3000 {
				many.WriteString("match " + strings.Repeat("y", 400) + "\n")
			}
			f.write("many.txt", many.String())
			res := f.grepWith(e.rg, map[string]any{"pattern": "^match", "output_mode": "content", "limit": 2000})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			r := res.Value.(FSGrepResult)
			first := r.Files[0].Lines[0].Text
			if !strings.HasPrefix(first, "match é") || !strings.HasSuffix(first, "more bytes]") || len(first) > MaxSearchLineBytes+32 {
				t.Errorf("long line shown as %q", first)
			}
			if len(res.Text) > MaxSearchOutputBytes+1024 {
				t.Errorf("output is %d bytes; cap %d", len(res.Text), MaxSearchOutputBytes)
			}
			shown := 0
			for _, fl := range r.Files {
				shown += countMatches(fl.Lines)
			}
			if r.TotalMatches != 3001 || shown+r.Omitted != 3001 || r.Omitted == 0 {
				t.Errorf("total %d, shown %d, omitted %d; want 3001 = shown + omitted, some omitted", r.TotalMatches, shown, r.Omitted)
			}
			if !strings.Contains(res.Text, "[truncated: ") {
				t.Errorf("no truncation note at the end of %q", res.Text[len(res.Text)-200:])
			}
		})
	}
}

// TestGrepManyFilesBounded: with far more matching files than the limit,
// the collector folds what cannot be shown and still counts it.
func TestGrepManyFilesBounded(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 600 {
		f.write(filepath.Join("d", strings.Repeat("f", 1+i%7)+"-"+strconv.Itoa(i)+".txt"), "hit\n")
	}
	r := f.call("fs.grep", map[string]any{"pattern": "hit", "limit": 10}).Value.(FSGrepResult)
	if r.TotalFiles != 600 || len(r.Files) != 10 || r.Omitted != 590 {
		t.Errorf("total %d, shown %d, omitted %d; want 600, 10, 590", r.TotalFiles, len(r.Files), r.Omitted)
	}
	if r.Files[0].Path != "d/f-0.txt" {
		t.Errorf("first file %q; want the first in path order, d/f-0.txt", r.Files[0].Path)
	}
}

// TestSearchConfined: with confine, paths outside the workspace are
// refused as fs.read refuses them, and a symlink to outside is not
// followed.
func TestSearchConfined(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, &environment.LocalOptions{Confine: true})
	f.write("in.txt", "s3cret inside\n")
	if err := os.Symlink(outside, filepath.Join(f.ws, "out")); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"fs.grep", "fs.glob"} {
		for _, p := range []string{outside, "..", "out", "../" + filepath.Base(outside)} {
			e := f.fails(tool, map[string]any{"pattern": "*", "path": p})
			if tool == "fs.grep" {
				e = f.fails(tool, map[string]any{"pattern": "s3cret", "path": p})
			}
			if e.Kind != registry.KindInvalidInput || !strings.Contains(e.Message, "outside the workspace") {
				t.Errorf("%s path %q: %v %q; want refused as outside the workspace", tool, p, e.Kind, e.Message)
			}
		}
	}
	if got := f.ok("fs.grep", map[string]any{"pattern": "s3cret"}); got != "in.txt" {
		t.Errorf("fs.grep over the workspace = %q; want only in.txt (the symlink not followed)", got)
	}
	if got := f.ok("fs.glob", map[string]any{"pattern": "**"}); got != "in.txt" {
		t.Errorf("fs.glob ** = %q; want only in.txt", got)
	}
}

// TestSandboxSearchConfined: in the sandbox, both tools refuse what is
// not mounted, and ripgrep runs inside it.
func TestSandboxSearchConfined(t *testing.T) {
	testenv.MustHaveBwrap(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := newEnvFixture(t, &Module{}, env)
	f.write("in.txt", "s3cret inside\n")
	if err := os.Symlink(outside, filepath.Join(f.ws, "out")); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"fs.grep", "fs.glob"} {
		for _, p := range []string{"/etc", "/root", "/home"} {
			e := f.fails(tool, map[string]any{"pattern": "s3cret", "path": p})
			if e.Kind != registry.KindInvalidInput || !strings.Contains(e.Message, "outside the sandbox") {
				t.Errorf("%s path %q: %v %q; want refused as outside the sandbox", tool, p, e.Kind, e.Message)
			}
		}
		// The host's /tmp is not the sandbox's: its directories are not there.
		if e := f.fails(tool, map[string]any{"pattern": "s3cret", "path": outside}); e.Kind != registry.KindNotFound {
			t.Errorf("%s path %q (host /tmp): %v %q; want not found in the sandbox's own /tmp", tool, outside, e.Kind, e.Message)
		}
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			if e.rg != "" {
				requireRipgrep(t)
			}
			res := f.grepWith(e.rg, map[string]any{"pattern": "s3cret"})
			if res.Err != nil || res.Text != "in.txt" || res.Value.(FSGrepResult).Engine != e.name {
				t.Errorf("fs.grep = %+v; want in.txt by %s", res, e.name)
			}
			if e := f.grepWith(e.rg, map[string]any{"pattern": "s3cret", "path": "out"}); e.Err == nil {
				t.Errorf("fs.grep through a symlink to outside = %q; want refused", e.Text)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	eachEnv(t, func(t *testing.T, f *fixture) {
		f.writeTree(searchTree)
		// Distinct modification times, newest last written.
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i, name := range []string{"sub/c.go", "a.go", "docs/a/b/c.md", "keep.log", "b.txt"} {
			mt := base.Add(time.Duration(i) * time.Hour)
			if err := os.Chtimes(filepath.Join(f.ws, name), mt, mt); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			name string
			args map[string]any
			want string
		}{
			{"newest first", map[string]any{"pattern": "**/*.{go,md}"}, "docs/a/b/c.md\na.go\nsub/c.go"},
			{"by path", map[string]any{"pattern": "**/*.{go,md}", "sort": "path"}, "a.go\ndocs/a/b/c.md\nsub/c.go"},
			{"top level only", map[string]any{"pattern": "*.go"}, "a.go"},
			{"ignored files left out", map[string]any{"pattern": "**/*.log", "sort": "path"}, "keep.log\nsub/x.log"},
			{"under a directory", map[string]any{"pattern": "*", "path": "sub", "sort": "path"}, "sub/c.go\nsub/rootonly.txt\nsub/x.log"},
			{"fixed prefix", map[string]any{"pattern": "docs/**/*.md"}, "docs/a/b/c.md"},
			{"named ignored directory", map[string]any{"pattern": "build/*.txt"}, "build/out.txt"},
			{"named hidden directory", map[string]any{"pattern": ".hidden/*"}, ".hidden/h.txt"},
			{"missing prefix", map[string]any{"pattern": "nope/**"}, "No files match \"nope/**\" in WS"},
			{"hidden", map[string]any{"pattern": "**/.*", "hidden": true, "sort": "path"}, ".env\n.gitignore\nsub/.gitignore"},
			{"limit", map[string]any{"pattern": "**/*.txt", "sort": "path", "limit": 2},
				"b.txt\ncrlf.txt\n[truncated: 3 more files not shown (5 in all); narrow path or pattern, or raise limit]"},
		}
		for _, tt := range tests {
			got := f.ok("fs.glob", tt.args)
			if diff := cmp.Diff(strings.ReplaceAll(tt.want, "WS", f.ws), got); diff != "" {
				t.Errorf("%s: fs.glob(%v) (-want +got):\n%s", tt.name, tt.args, diff)
			}
		}
		r := f.call("fs.glob", map[string]any{"pattern": "a.go"}).Value.(FSGlobResult)
		if want := []GlobFile{{Path: "a.go", Size: int64(len(searchTree["a.go"])), Modified: base.Add(time.Hour)}}; !cmp.Equal(want, r.Files) {
			t.Errorf("structured = %+v; want %+v", r.Files, want)
		}
		for _, args := range []map[string]any{{"pattern": ""}, {"pattern": "[a"}, {"pattern": "/etc/*"}, {"pattern": "*", "sort": "size"}, {"pattern": "*", "path": "a.go"}} {
			if e := f.fails("fs.glob", args); e.Kind != registry.KindInvalidInput {
				t.Errorf("fs.glob(%v): %v %q; want invalid input", args, e.Kind, e.Message)
			}
		}
	})
}

func TestSearchAnnotations(t *testing.T) {
	for _, tl := range []*registry.Tool{fsGrepTool(DefaultRipgrep), fsGlobTool()} {
		want := registry.Annotations{Title: tl.Annotations.Title, ReadOnly: true, Idempotent: true}
		if tl.Annotations != want || tl.Annotations.Title == "" {
			t.Errorf("%s annotations %+v; want read-only, idempotent, not destructive, closed world", tl.Name, tl.Annotations)
		}
		if !tl.Preserve {
			t.Errorf("%s is not preserved like the other fs tools", tl.Name)
		}
	}
}

// TestGrepRipgrepFailsFallsBack: an rg that fails without output (too old
// for a flag, say) leaves the search to the walker, with a warning; one
// missing from PATH leaves it silently.
func TestGrepRipgrepFailsFallsBack(t *testing.T) {
	f := newFixture(t, nil)
	f.write("a.txt", "hello\n")
	broken := filepath.Join(t.TempDir(), "rg-old")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'rg: unrecognized flag --no-ignore-dot' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		rg, want string
	}{
		{broken, "a.txt\n[warning: ripgrep failed (rg: unrecognized flag --no-ignore-dot); searched with the Go walker instead]"},
		{"no-such-rg-here", "a.txt"},
	} {
		res := f.grepWith(tt.rg, map[string]any{"pattern": "hello"})
		if res.Err != nil {
			t.Fatalf("%s: %v", tt.rg, res.Err)
		}
		if diff := cmp.Diff(tt.want, res.Text); diff != "" || res.Value.(FSGrepResult).Engine != "walker" {
			t.Errorf("rg %s: engine %s (-want +got):\n%s", tt.rg, res.Value.(FSGrepResult).Engine, diff)
		}
	}
}

// TestWholeFileFilter: the whole-file prefilter is used only where it
// cannot miss a line the per-line pattern matches.
func TestWholeFileFilter(t *testing.T) {
	text := []byte("alpha\nbeta gamma\n  delta\nepsilon")
	tests := []struct {
		pattern string
		use     bool
		lines   int // lines of text the pattern matches
	}{
		{"^beta", true, 1},
		{"gamma$", true, 1},
		{"^epsilon$", true, 1},
		{`^\s+delta`, true, 1},
		{"^$", true, 0},
		{"a", true, 3},
		{`\Abeta`, false, 1},
		{`gamma\z`, false, 1},
		{`(?-m)^beta`, false, 1},
	}
	for _, tt := range tests {
		q, err := checkGrep(fsGrepArgs{Pattern: tt.pattern, OutputMode: GrepCount})
		if err != nil {
			t.Fatalf("%q: %v", tt.pattern, err)
		}
		if (q.whole != nil) != tt.use {
			t.Errorf("%q: prefilter used = %v; want %v", tt.pattern, q.whole != nil, tt.use)
		}
		if got := len(searchLines(text, q)); got != tt.lines {
			t.Errorf("%q matches %d lines; want %d", tt.pattern, got, tt.lines)
		}
	}
}
