package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// Bounds of fs.grep and fs.glob.
const (
	// DefaultSearchLimit is how many entries (files, counts or matching
	// lines) fs.grep and fs.glob show unless asked for another number.
	DefaultSearchLimit = 100
	// MaxSearchLimit is the most entries one call may ask for.
	MaxSearchLimit = 2000
	// MaxSearchFileBytes is the largest file fs.grep searches; larger
	// ones are skipped (ripgrep's --max-filesize), so one generated blob
	// cannot hold the server's memory.
	MaxSearchFileBytes = 16 << 20
	// MaxSearchOutputBytes caps the text of one result; entries past it
	// are counted in the truncation note instead.
	MaxSearchOutputBytes = 64 << 10
	// MaxSearchLineBytes caps one shown line; the rest is elided.
	MaxSearchLineBytes = 500
	// MaxSearchContext caps context lines on each side of a match.
	MaxSearchContext = 20
)

// searchScope is the directory or file a search runs on, and how to show
// the paths under it.
type searchScope struct {
	env  environment.Environment
	root string // the path searched, as the environment resolved it
	// base is the directory whose .gitignore files apply from the top:
	// the workspace when root is inside it, else root (or root's
	// directory for a file). rel is root relative to base ("." for base).
	base, rel string
	isFile    bool
	// shown is the prefix paths relative to base get in results: "" for
	// the workspace, its absolute path otherwise.
	shown string
}

// resolveScope resolves a tool's path argument (empty: the workspace)
// through the environment, so confinement is exactly fs.read's, and says
// whether it names a file or a directory.
func resolveScope(ctx context.Context, tc *registry.ToolContext, tool, p string) (*searchScope, error) {
	env, err := envOf(tc, tool)
	if err != nil {
		return nil, err
	}
	if p == "" {
		p = "."
	}
	root, err := env.ResolvePath(p)
	if err != nil {
		return nil, envError(err)
	}
	ws, err := env.ResolvePath(env.Workspace())
	if err != nil {
		ws = env.Workspace()
	}
	sc := &searchScope{env: env, root: root}
	isDir, err := isDirectory(ctx, env, root)
	if err != nil {
		return nil, err
	}
	sc.isFile = !isDir
	switch {
	case root == ws || strings.HasPrefix(root, ws+"/"):
		sc.base, sc.rel = ws, "."
		if root != ws {
			sc.rel = filepath.ToSlash(root[len(ws)+1:])
		}
	case sc.isFile:
		sc.base, sc.rel, sc.shown = filepath.Dir(root), filepath.Base(root), strings.TrimSuffix(filepath.Dir(root), "/")+"/"
	default:
		sc.base, sc.rel, sc.shown = root, ".", strings.TrimSuffix(root, "/")+"/"
	}
	return sc, nil
}

// isDirectory reports whether path is a directory, using the
// environment's tree when it has one, else whether ReadText calls it one.
func isDirectory(ctx context.Context, env environment.Environment, p string) (bool, error) {
	if tr, ok := env.(environment.TreeReader); ok {
		t, err := tr.OpenTree(p)
		if err == nil {
			t.Close()
			return true, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return false, &registry.Error{Kind: registry.KindNotFound, Message: "no such file or directory: " + p, Cause: err}
		}
		if errors.Is(err, environment.ErrOutsideWorkspace) {
			return false, envError(err)
		}
		return false, nil
	}
	_, err := env.ReadText(ctx, p)
	switch {
	case errors.Is(err, environment.ErrIsDir):
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, &registry.Error{Kind: registry.KindNotFound, Message: "no such file or directory: " + p, Cause: err}
	}
	return false, nil
}

// display turns a path relative to the scope's base into the one shown.
func (s *searchScope) display(rel string) string {
	return s.shown + rel
}

// fromRoot turns a path relative to root into one relative to base.
func (s *searchScope) fromRoot(rel string) string {
	if s.rel == "." {
		return rel
	}
	return s.rel + "/" + rel
}

// underRoot returns rel (relative to base) relative to the search root.
func (s *searchScope) underRoot(rel string) string {
	if s.rel == "." {
		return rel
	}
	return strings.TrimPrefix(rel, s.rel+"/")
}

// hiddenPath reports whether a name on the path rel (relative to the
// search root) starts with ".", as ripgrep's hidden-file rule.
func hiddenPath(rel string) bool {
	for name := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(name, ".") && name != "." && name != ".." {
			return true
		}
	}
	return false
}

// gitPath reports whether rel has a ".git" component: git's own files are
// never searched, even with hidden files included.
func gitPath(rel string) bool {
	for name := range strings.SplitSeq(rel, "/") {
		if name == ".git" {
			return true
		}
	}
	return false
}

// walkOptions are what a tree walk skips.
type walkOptions struct {
	hidden bool // include names starting with "."
}

// walkFiles visits the regular files under the scope's root in walk order
// (each directory's entries sorted by name, depth first), not entering
// ignored, hidden or .git directories and not following symlinks, as
// ripgrep walks. visit gets paths relative to base; returning false stops
// the walk. Unreadable directories are counted in warn and skipped.
func walkFiles(ctx context.Context, tree environment.Tree, sc *searchScope, ig *ignoreSet, o walkOptions, warn *warnings, visit func(rel string, d fs.DirEntry) bool) error {
	if sc.isFile {
		fi, err := tree.Stat(sc.rel)
		if err != nil {
			return envError(err)
		}
		visit(sc.rel, fs.FileInfoToDirEntry(fi))
		return nil
	}
	var walk func(dir string) (bool, error)
	walk = func(dir string) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, &registry.Error{Kind: registry.KindTemporary, Message: "search cancelled", Cause: err}
		}
		entries, err := tree.ReadDir(dir)
		if err != nil {
			warn.add("cannot list %s: %v", sc.display(dir), errors.Unwrap(err))
			return true, nil
		}
		for _, d := range entries {
			name := d.Name()
			rel := name
			if dir != "." {
				rel = dir + "/" + name
			}
			if name == ".git" || (!o.hidden && strings.HasPrefix(name, ".")) {
				continue
			}
			switch t := d.Type(); {
			case t&fs.ModeSymlink != 0:
				continue
			case t.IsDir():
				if ig.ignored(rel, true) {
					continue
				}
				if more, err := walk(rel); !more || err != nil {
					return more, err
				}
			case t.IsRegular():
				if ig.ignored(rel, false) {
					continue
				}
				if !visit(rel, d) {
					return false, nil
				}
			}
		}
		return true, nil
	}
	_, err := walk(sc.rel)
	return err
}

// treeIgnores returns an ignoreSet reading .gitignore files from tree.
func treeIgnores(tree environment.Tree) *ignoreSet {
	return newIgnoreSet(func(dir string) string {
		p := path.Join(dir, ".gitignore")
		fi, err := tree.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxSearchFileBytes {
			return ""
		}
		b, err := fs.ReadFile(tree, p)
		if err != nil {
			return ""
		}
		return string(b)
	})
}

// envIgnores returns an ignoreSet reading .gitignore files through the
// environment's ReadText, for environments without a tree.
func envIgnores(ctx context.Context, env environment.Environment, base string) *ignoreSet {
	return newIgnoreSet(func(dir string) string {
		text, err := env.ReadText(ctx, filepath.Join(base, filepath.FromSlash(dir), ".gitignore"))
		if err != nil {
			return ""
		}
		return text
	})
}

// warnings collects what a search skipped, bounded.
type warnings struct {
	list []string
	more int
}

func (w *warnings) add(format string, args ...any) {
	if len(w.list) >= 5 {
		w.more++
		return
	}
	w.list = append(w.list, fmt.Sprintf(format, args...))
}

func (w *warnings) result() []string {
	if w.more > 0 {
		return append(w.list, fmt.Sprintf("%d more warnings", w.more))
	}
	return w.list
}

// fileGlob is a glob filter on file paths, as ripgrep's --glob: a pattern
// without "/" matches the file name at any depth, one with "/" the path
// relative to the search root.
type fileGlob struct {
	pattern  string
	basename bool
	negate   bool // a leading "!": files matching are left out
}

func parseFileGlob(arg, p string) (*fileGlob, error) {
	if p == "" {
		return nil, nil
	}
	g := &fileGlob{}
	if strings.HasPrefix(p, "!") {
		g.negate = true
		p = p[1:]
	}
	p = strings.TrimPrefix(p, "./")
	if p == "" || !doublestar.ValidatePattern(p) {
		return nil, fail(registry.KindInvalidInput, "`%s` %q is not a valid glob (empty, an unclosed [ or {, or a trailing \\)", arg, p)
	}
	g.pattern, g.basename = p, !strings.Contains(p, "/")
	return g, nil
}

// match reports whether rel (relative to the search root) passes.
func (g *fileGlob) match(rel string) bool {
	if g == nil {
		return true
	}
	if g.basename {
		rel = path.Base(rel)
	}
	ok, _ := doublestar.Match(g.pattern, rel)
	return ok != g.negate
}

// compilePattern checks and compiles a search pattern the way both
// engines will use it, so a bad one is refused before anything runs.
func compilePattern(pattern string, literal, ignoreCase bool) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, fail(registry.KindInvalidInput, "`pattern` must not be empty.")
	}
	if strings.ContainsAny(pattern, "\n\r") && literal {
		return nil, fail(registry.KindInvalidInput, "`pattern` must not contain a line break: fs.grep matches one line at a time")
	}
	src := pattern
	if literal {
		src = regexp.QuoteMeta(pattern)
	}
	if ignoreCase {
		src = "(?i)" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			return nil, fail(registry.KindInvalidInput, "invalid regular expression %q: %s in %q (Go RE2 syntax: no look-around or backreferences; escape literal metacharacters, or set literal=true)", pattern, se.Code, se.Expr)
		}
		return nil, fail(registry.KindInvalidInput, "invalid regular expression %q: %v", pattern, err)
	}
	if parsed, err := syntax.Parse(src, syntax.Perl); err == nil && hasNewline(parsed) {
		return nil, fail(registry.KindInvalidInput, "regular expression %q matches a line break (\\n); fs.grep matches one line at a time", pattern)
	}
	return re, nil
}

// hasNewline reports whether re contains a literal line feed, which
// ripgrep refuses in line-by-line search.
func hasNewline(re *syntax.Regexp) bool {
	if re.Op == syntax.OpLiteral {
		for _, r := range re.Rune {
			if r == '\n' {
				return true
			}
		}
	}
	for _, s := range re.Sub {
		if hasNewline(s) {
			return true
		}
	}
	return false
}

// clipLine makes a line safe to show: valid UTF-8, at most
// MaxSearchLineBytes, without its terminator.
func clipLine(b []byte) string {
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) > MaxSearchLineBytes {
		cut := MaxSearchLineBytes
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return strings.ToValidUTF8(string(b[:cut]), "\uFFFD") + fmt.Sprintf("… [%d more bytes]", len(b)-cut)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// limitArg checks a limit argument, returning the default for 0.
func limitArg(v int) (int, error) {
	switch {
	case v < 0:
		return 0, fail(registry.KindInvalidInput, "`limit` must be >= 0.")
	case v == 0:
		return DefaultSearchLimit, nil
	case v > MaxSearchLimit:
		return 0, fail(registry.KindInvalidInput, "`limit` must be <= %d.", MaxSearchLimit)
	}
	return v, nil
}

// comparePaths orders slash paths as a walk visits them: component by
// component, so "a/b" comes before "a.txt".
func comparePaths(a, b string) int {
	for {
		ca, ra, _ := strings.Cut(a, "/")
		cb, rb, _ := strings.Cut(b, "/")
		if c := strings.Compare(ca, cb); c != 0 {
			return c
		}
		if ra == "" || rb == "" {
			return strings.Compare(ra, rb)
		}
		a, b = ra, rb
	}
}
