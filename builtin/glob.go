package builtin

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// Orders of fs.glob.
const (
	GlobByModified = "modified"
	GlobByPath     = "path"
)

type fsGlobArgs struct {
	Pattern string `json:"pattern" jsonschema_description:"Glob matched against paths under path: * and ? stay within one directory, ** matches any number of directories, [abc] and {a,b} as usual (\"**/*.go\", \"src/**/*.{ts,tsx}\", \"*.md\" for the top directory only)."`
	Path    string `json:"path,omitempty" jsonschema_description:"Directory to search; relative paths resolve against the workspace. Default: the workspace."`
	Sort    string `json:"sort,omitempty" jsonschema:"enum=modified,enum=path,default=modified" jsonschema_description:"modified: most recently modified first; path: in path order."`
	Hidden  bool   `json:"hidden,omitempty" jsonschema_description:"Also list hidden files and directories (names starting with a dot); .git never."`
	Limit   int    `json:"limit,omitempty" jsonschema:"default=100" jsonschema_description:"Most files listed; the rest are counted in a note. At most 2000."`
}

// GlobFile is one file fs.glob found.
type GlobFile struct {
	// Path is relative to the workspace when the file is in it, else
	// absolute.
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// FSGlobResult is fs.glob's structured result.
type FSGlobResult struct {
	Pattern string `json:"pattern"`
	// Root is the absolute directory searched.
	Root  string     `json:"root"`
	Sort  string     `json:"sort"`
	Files []GlobFile `json:"files"`
	// Total counts every matching file; Omitted those not listed.
	Total    int      `json:"total"`
	Omitted  int      `json:"omitted"`
	Warnings []string `json:"warnings,omitempty"`
}

func fsGlobTool() *registry.Tool {
	return registry.MustNewTool("fs.glob",
		"Find files by name with a glob pattern, under a directory (default: the workspace); most recently modified first unless sort=path. Honours .gitignore files as fs.grep does, skips hidden files unless hidden=true and never lists .git or follows symlinks; directories named in the pattern's fixed start (build/*.js, .github/**) are entered even when ignored or hidden, as a path is. Past limit (default 100) a note says how many more there are.",
		runFSGlob,
		registry.WithPreserve(),
		registry.WithRenderer(renderGlob),
		registry.WithAnnotations(registry.Annotations{Title: "Find files by name", ReadOnly: true, Idempotent: true}))
}

func runFSGlob(ctx context.Context, tc *registry.ToolContext, in fsGlobArgs) (FSGlobResult, error) {
	pattern := strings.TrimPrefix(in.Pattern, "./")
	if pattern == "" {
		return FSGlobResult{}, fail(registry.KindInvalidInput, "`pattern` must not be empty.")
	}
	if strings.HasPrefix(pattern, "/") {
		return FSGlobResult{}, fail(registry.KindInvalidInput, "`pattern` %q is matched under path; give the directory as path and a relative pattern", in.Pattern)
	}
	if !doublestar.ValidatePattern(pattern) {
		return FSGlobResult{}, fail(registry.KindInvalidInput, "`pattern` %q is not a valid glob (an unclosed [ or {, or a trailing \\)", in.Pattern)
	}
	order := in.Sort
	switch order {
	case "":
		order = GlobByModified
	case GlobByModified, GlobByPath:
	default:
		return FSGlobResult{}, fail(registry.KindInvalidInput, "`sort` %q: want %s or %s.", in.Sort, GlobByModified, GlobByPath)
	}
	limit, err := limitArg(in.Limit)
	if err != nil {
		return FSGlobResult{}, err
	}
	sc, err := resolveScope(ctx, tc, "fs.glob", in.Path)
	if err != nil {
		return FSGlobResult{}, err
	}
	if sc.isFile {
		return FSGlobResult{}, fail(registry.KindInvalidInput, "%s is a file; fs.glob needs a directory as path", sc.root)
	}
	tr, ok := sc.env.(environment.TreeReader)
	if !ok {
		return FSGlobResult{}, fail(registry.KindConfig, "fs.glob: this environment cannot list directories; use bash (find)")
	}
	tree, err := tr.OpenTree(sc.base)
	if err != nil {
		return FSGlobResult{}, envError(err)
	}
	defer tree.Close()
	// Walk only below the pattern's fixed leading directories.
	start := *sc
	if dir, _ := doublestar.SplitPattern(pattern); dir != "." && !strings.ContainsAny(dir, `*?[{\`) {
		start.rel = sc.fromRoot(dir)
		if fi, err := tree.Stat(start.rel); err != nil || !fi.IsDir() {
			return FSGlobResult{Pattern: in.Pattern, Root: sc.root, Sort: order, Files: []GlobFile{}}, nil
		}
	}
	var files []GlobFile
	var warn warnings
	early := 0 // files trim let go of
	compare := globCompare(order)
	trim := func() {
		slices.SortFunc(files, compare)
		if len(files) > limit {
			early += len(files) - limit
			clear(files[limit:])
			files = files[:limit]
		}
	}
	err = walkFiles(ctx, tree, &start, treeIgnores(tree), walkOptions{hidden: in.Hidden}, &warn, func(rel string, d fs.DirEntry) bool {
		if ok, _ := doublestar.Match(pattern, sc.underRoot(rel)); !ok {
			return true
		}
		info, err := d.Info()
		if err != nil {
			warn.add("cannot stat %s: %v", sc.display(rel), err)
			return true
		}
		files = append(files, GlobFile{Path: rel, Size: info.Size(), Modified: info.ModTime().UTC()})
		if len(files) > 4*limit+1024 {
			trim() // bounded memory however many files match
		}
		return true
	})
	if err != nil {
		return FSGlobResult{}, err
	}
	trim()
	r := FSGlobResult{Pattern: in.Pattern, Root: sc.root, Sort: order, Warnings: warn.result()}
	r.Total = len(files) + early
	for i := range files {
		files[i].Path = sc.display(files[i].Path)
	}
	r.Files = files
	r.Omitted = r.Total - len(files)
	return r, nil
}

// globCompare orders files for sort: by path, or newest first (ties
// by path).
func globCompare(order string) func(a, b GlobFile) int {
	byPath := func(a, b GlobFile) int { return comparePaths(a.Path, b.Path) }
	if order == GlobByPath {
		return byPath
	}
	return func(a, b GlobFile) int {
		if c := b.Modified.Compare(a.Modified); c != 0 {
			return c
		}
		return byPath(a, b)
	}
}

func renderGlob(r FSGlobResult) string {
	var b strings.Builder
	if r.Total == 0 {
		fmt.Fprintf(&b, "No files match %q in %s", r.Pattern, r.Root)
	}
	size := 0
	shown := 0
	for _, f := range r.Files {
		if size+len(f.Path)+1 > MaxSearchOutputBytes {
			break
		}
		size += len(f.Path) + 1
		shown++
		b.WriteString(f.Path + "\n")
	}
	if more := r.Total - shown; more > 0 {
		fmt.Fprintf(&b, "[truncated: %d more files not shown (%d in all); narrow path or pattern, or raise limit]\n", more, r.Total)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "[warning: %s]\n", w)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
