package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/invopop/jsonschema"
)

// Output modes of fs.grep.
const (
	GrepFiles   = "files_with_matches"
	GrepContent = "content"
	GrepCount   = "count"
)

// DefaultRipgrep is the ripgrep command fs.grep runs inside the call's
// environment when it is on that environment's PATH.
const DefaultRipgrep = "rg"

type fsGrepArgs struct {
	Pattern    string `json:"pattern" jsonschema_description:"Regular expression to search file contents for (Go RE2 syntax, see the tool description), or a fixed string with literal=true."`
	Path       string `json:"path,omitempty" jsonschema_description:"File or directory to search; relative paths resolve against the workspace. Default: the workspace."`
	Glob       string `json:"glob,omitempty" jsonschema_description:"Only search files matching this glob: without a slash it matches file names at any depth (\"*.go\", \"*.{ts,tsx}\"), with one the path under path (\"cmd/**/*.go\")."`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema_description:"Match case-insensitively."`
	Literal    bool   `json:"literal,omitempty" jsonschema_description:"Treat pattern as a fixed string, not a regular expression."`
	OutputMode string `json:"output_mode,omitempty" jsonschema:"enum=files_with_matches,enum=content,enum=count,default=files_with_matches" jsonschema_description:"files_with_matches: the paths of matching files; content: matching lines as path:line:text; count: path:number of matching lines."`
	Context    int    `json:"context,omitempty" jsonschema:"default=0" jsonschema_description:"Lines of context shown before and after each match (content mode)."`
	Before     *int   `json:"before,omitempty" jsonschema:"nullable" jsonschema_description:"Lines of context before each match; overrides context."`
	After      *int   `json:"after,omitempty" jsonschema:"nullable" jsonschema_description:"Lines of context after each match; overrides context."`
	Hidden     bool   `json:"hidden,omitempty" jsonschema_description:"Also search hidden files and directories (names starting with a dot); .git is never searched."`
	Limit      int    `json:"limit,omitempty" jsonschema:"default=100" jsonschema_description:"Most entries shown: files (files_with_matches, count) or matching lines (content); the rest are counted in a note. At most 2000."`
}

// JSONSchemaExtend hoists the nullable fields' descriptions.
func (fsGrepArgs) JSONSchemaExtend(s *jsonschema.Schema) { registry.HoistNullable(s) }

// GrepLine is one line fs.grep shows.
type GrepLine struct {
	// Line is the 1-based line number.
	Line int `json:"line"`
	// Text is the line without its terminator, clipped to
	// MaxSearchLineBytes.
	Text string `json:"text"`
	// Match is false for a context line.
	Match bool `json:"match"`
}

// GrepFile is one matching file.
type GrepFile struct {
	// Path is relative to the workspace when the file is in it, else
	// absolute.
	Path string `json:"path"`
	// Count is the number of matching lines.
	Count int `json:"count"`
	// Lines are the matching lines shown with their context (content
	// mode only).
	Lines []GrepLine `json:"lines,omitempty"`
}

// FSGrepResult is fs.grep's structured result.
type FSGrepResult struct {
	Pattern string `json:"pattern"`
	// Root is the absolute file or directory searched.
	Root string `json:"root"`
	Mode string `json:"mode"`
	// Engine is "ripgrep" or "walker" (the Go search).
	Engine string     `json:"engine"`
	Files  []GrepFile `json:"files"`
	// TotalFiles and TotalMatches count every matching file and line,
	// shown or not.
	TotalFiles   int `json:"total_files"`
	TotalMatches int `json:"total_matches"`
	// Omitted counts the entries (files, or lines in content mode) left
	// out by the limit or the output size cap.
	Omitted  int      `json:"omitted"`
	Warnings []string `json:"warnings,omitempty"`
}

const grepDescription = `Search file contents for a regular expression, under a directory (default: the workspace) or in one file. Honours .gitignore files (from the workspace root down, also outside git repositories), skips hidden files unless hidden=true, never searches .git, skips binary files (a NUL byte) and files over 16 MiB, and does not follow symlinks.
output_mode: files_with_matches (default), content (path:line:text, context lines as path-line-text, groups split by --) or count. Results are in path order; past limit (default 100) a note says how many more there are.
Patterns are Go RE2 regular expressions, checked before searching; the search runs with ripgrep when it is installed, else in Go, with the same results except: \w \d \s \b are Unicode-aware under ripgrep but ASCII-only in Go (write [\p{L}\p{N}_] for letters of any script); no look-around or backreferences in either; a pattern cannot match across lines. Use literal=true for a fixed string and ignore_case=true for case-insensitive search.`

// fsGrepTool returns fs.grep; rg is the ripgrep command to try inside
// the environment ("" never tries it: the Go walker always runs).
func fsGrepTool(rg string) *registry.Tool {
	return registry.MustNewTool("fs.grep", grepDescription,
		func(ctx context.Context, tc *registry.ToolContext, in fsGrepArgs) (FSGrepResult, error) {
			return runFSGrep(ctx, tc, in, rg)
		},
		registry.WithPreserve(),
		registry.WithRenderer(renderGrep),
		registry.WithAnnotations(registry.Annotations{Title: "Search file contents", ReadOnly: true, Idempotent: true}))
}

// grepQuery is a checked fs.grep call.
type grepQuery struct {
	re *regexp.Regexp
	// whole, when set, finds in a whole file every line re would match
	// (and maybe more): a file it does not match is skipped unsplit.
	whole         *regexp.Regexp
	in            fsGrepArgs
	glob          *fileGlob
	mode          string
	before, after int
	limit         int
}

func checkGrep(in fsGrepArgs) (*grepQuery, error) {
	q := &grepQuery{in: in, mode: in.OutputMode}
	var err error
	if q.re, err = compilePattern(in.Pattern, in.Literal, in.IgnoreCase); err != nil {
		return nil, err
	}
	q.whole = wholeFileFilter(q.re)
	switch q.mode {
	case "":
		q.mode = GrepFiles
	case GrepFiles, GrepContent, GrepCount:
	default:
		return nil, fail(registry.KindInvalidInput, "`output_mode` %q: want %s, %s or %s.", in.OutputMode, GrepFiles, GrepContent, GrepCount)
	}
	if q.glob, err = parseFileGlob("glob", in.Glob); err != nil {
		return nil, err
	}
	if q.limit, err = limitArg(in.Limit); err != nil {
		return nil, err
	}
	ctxArg := func(name string, v int) (int, error) {
		if v < 0 || v > MaxSearchContext {
			return 0, fail(registry.KindInvalidInput, "`%s` must be between 0 and %d.", name, MaxSearchContext)
		}
		return v, nil
	}
	if q.before, err = ctxArg("context", in.Context); err != nil {
		return nil, err
	}
	q.after = q.before
	if in.Before != nil {
		if q.before, err = ctxArg("before", *in.Before); err != nil {
			return nil, err
		}
	}
	if in.After != nil {
		if q.after, err = ctxArg("after", *in.After); err != nil {
			return nil, err
		}
	}
	if q.mode != GrepContent {
		q.before, q.after = 0, 0
	}
	return q, nil
}

func runFSGrep(ctx context.Context, tc *registry.ToolContext, in fsGrepArgs, rg string) (FSGrepResult, error) {
	q, err := checkGrep(in)
	if err != nil {
		return FSGrepResult{}, err
	}
	sc, err := resolveScope(ctx, tc, "fs.grep", in.Path)
	if err != nil {
		return FSGrepResult{}, err
	}
	col := newGrepCollector(q)
	var warn warnings
	engine := "walker"
	ran := false
	if rg != "" && !sc.isFile {
		ran, err = grepRipgrep(ctx, sc, q, rg, col, &warn)
		if err != nil {
			return FSGrepResult{}, err
		}
		if ran {
			engine = "ripgrep"
		}
	}
	if !ran {
		if err := grepWalk(ctx, sc, q, col, &warn); err != nil {
			return FSGrepResult{}, err
		}
	}
	r := col.result(sc)
	r.Pattern, r.Root, r.Mode, r.Engine, r.Warnings = in.Pattern, sc.root, q.mode, engine, warn.result()
	return r, nil
}

// grepWalk searches with the Go walker through the environment's tree.
func grepWalk(ctx context.Context, sc *searchScope, q *grepQuery, col *grepCollector, warn *warnings) error {
	tr, ok := sc.env.(environment.TreeReader)
	switch {
	case !ok && sc.isFile:
		// One file needs no listing: ReadText refuses binary files.
		text, err := sc.env.ReadText(ctx, sc.root)
		switch {
		case errors.Is(err, environment.ErrBinary):
			return nil
		case err != nil:
			return envError(err)
		}
		col.addFile(sc.rel, searchLines([]byte(text), q))
		return nil
	case !ok:
		return fail(registry.KindConfig, "fs.grep: this environment cannot list directories and has no ripgrep (%s) on its PATH; install ripgrep there", DefaultRipgrep)
	}
	tree, err := tr.OpenTree(sc.base)
	if err != nil {
		return envError(err)
	}
	defer tree.Close()
	err = walkFiles(ctx, tree, sc, treeIgnores(tree), walkOptions{hidden: q.in.Hidden}, warn, func(rel string, d fs.DirEntry) bool {
		if !sc.isFile && !q.glob.match(sc.underRoot(rel)) {
			return true
		}
		data, err := readSearchable(tree, rel)
		if err != nil {
			warn.add("cannot read %s: %v", sc.display(rel), err)
			return true
		}
		if data != nil {
			col.addFile(rel, searchLines(data, q))
		}
		return ctx.Err() == nil
	})
	if err == nil && ctx.Err() != nil {
		err = &registry.Error{Kind: registry.KindTemporary, Message: "fs.grep cancelled", Cause: ctx.Err()}
	}
	return err
}

// readSearchable reads a regular file of the tree that fs.grep searches:
// nil, without an error, for one over MaxSearchFileBytes, binary (a NUL
// byte), or not a regular file.
func readSearchable(tree environment.Tree, rel string) ([]byte, error) {
	f, err := tree.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > MaxSearchFileBytes {
		return nil, nil
	}
	data := make([]byte, 0, fi.Size()+1)
	buf := bytes.NewBuffer(data)
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxSearchFileBytes+1)); err != nil {
		return nil, err
	}
	if buf.Len() > MaxSearchFileBytes || bytes.IndexByte(buf.Bytes(), 0) >= 0 {
		return nil, nil
	}
	return buf.Bytes(), nil
}

// searchLines returns the lines of data that match q and their context.
func searchLines(data []byte, q *grepQuery) []rawLine {
	if q.whole != nil && !q.whole.Match(data) {
		return nil
	}
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, data)
			break
		}
		lines = append(lines, data[:i])
		data = data[i+1:]
	}
	var out []rawLine
	shownTo := -1 // index of the last line already in out
	for i, l := range lines {
		if !q.re.Match(l) {
			continue
		}
		for j := max(i-q.before, shownTo+1); j < i; j++ {
			out = append(out, rawLine{n: j + 1, text: lines[j]})
		}
		if i <= shownTo {
			// Already shown as after-context: mark it a match.
			for k := range out {
				if out[k].n == i+1 {
					out[k].match = true
				}
			}
		} else {
			out = append(out, rawLine{n: i + 1, text: l, match: true})
		}
		for j := max(i+1, shownTo+1); j <= min(i+q.after, len(lines)-1); j++ {
			out = append(out, rawLine{n: j + 1, text: lines[j]})
		}
		shownTo = max(shownTo, i, min(i+q.after, len(lines)-1))
	}
	return out
}

// wholeFileFilter returns re in multi-line mode, where "^" and "$" match
// at line boundaries, so that one scan of a whole file tells whether any
// of its lines can match; nil when re anchors at the start or end of the
// text ((?-m), \A, \z), which in a whole file means something else.
func wholeFileFilter(re *regexp.Regexp) *regexp.Regexp {
	src := "(?m)" + re.String()
	parsed, err := syntax.Parse(src, syntax.Perl)
	if err != nil || anchorsText(parsed) {
		return nil
	}
	whole, err := regexp.Compile(src)
	if err != nil {
		return nil
	}
	return whole
}

func anchorsText(re *syntax.Regexp) bool {
	if re.Op == syntax.OpBeginText || re.Op == syntax.OpEndText {
		return true
	}
	for _, s := range re.Sub {
		if anchorsText(s) {
			return true
		}
	}
	return false
}

// rawLine is a line found by either engine, before clipping.
type rawLine struct {
	n     int
	text  []byte
	match bool
}

// grepCollector gathers matching files in any order and keeps, of the
// shown part, only what the limits allow: memory stays bounded however
// many lines match.
type grepCollector struct {
	q     *grepQuery
	files []GrepFile
	total int
	// foldedFiles and foldedMatches count the files compact dropped.
	foldedFiles, foldedMatches int
}

func newGrepCollector(q *grepQuery) *grepCollector { return &grepCollector{q: q} }

// addFile records a file (path relative to the scope's base) and its
// lines; a file without a matching line is dropped. No file can show
// more than limit matching lines, so only those (and their context) are
// kept.
func (c *grepCollector) addFile(rel string, lines []rawLine) {
	n := 0
	for _, l := range lines {
		if l.match {
			n++
		}
	}
	if n == 0 {
		return
	}
	c.total += n
	f := GrepFile{Path: rel, Count: n}
	if c.q.mode == GrepContent {
		kept, last := 0, 0
		for _, l := range lines {
			if l.match {
				if kept == c.q.limit {
					break
				}
				kept++
				last = l.n
			}
			f.Lines = append(f.Lines, GrepLine{Line: l.n, Text: clipLine(l.text), Match: l.match})
		}
		// Context past the last kept match's after-context leads to a
		// match left out.
		for len(f.Lines) > 0 && !f.Lines[len(f.Lines)-1].Match && f.Lines[len(f.Lines)-1].Line > last+c.q.after {
			f.Lines = f.Lines[:len(f.Lines)-1]
		}
	}
	c.files = append(c.files, f)
	// Keep the stored part bounded: sort and drop what cannot be shown.
	if len(c.files) > 4*c.q.limit+64 {
		c.compact()
	}
}

// empty reports whether no matching file was recorded.
func (c *grepCollector) empty() bool { return len(c.files) == 0 && c.foldedFiles == 0 }

// compact sorts the files and folds those past the limit into counts.
// A file dropped here can never be shown: files arriving later only push
// it further down.
func (c *grepCollector) compact() {
	slices.SortFunc(c.files, func(a, b GrepFile) int { return comparePaths(a.Path, b.Path) })
	budget := c.q.limit
	kept := c.files[:0]
	for _, f := range c.files {
		if budget <= 0 {
			c.foldedFiles++
			c.foldedMatches += f.Count
			continue
		}
		if c.q.mode == GrepContent {
			budget -= f.Count
		} else {
			budget--
		}
		kept = append(kept, f)
	}
	clear(c.files[len(kept):])
	c.files = kept
}

// result applies the limit and the output cap, in path order.
func (c *grepCollector) result(sc *searchScope) FSGrepResult {
	slices.SortFunc(c.files, func(a, b GrepFile) int { return comparePaths(a.Path, b.Path) })
	r := FSGrepResult{TotalFiles: len(c.files) + c.foldedFiles, TotalMatches: c.total, Files: []GrepFile{}}
	size := 0
	entries := 0 // shown entries: files, or matching lines in content mode
	for _, f := range c.files {
		f.Path = sc.display(f.Path)
		if c.q.mode != GrepContent {
			line := len(f.Path) + 1
			if c.q.mode == GrepCount {
				line += len(strconv.Itoa(f.Count)) + 1
			}
			if entries >= c.q.limit || size+line > MaxSearchOutputBytes {
				r.Omitted++
				continue
			}
			size += line
			entries++
			f.Lines = nil
			r.Files = append(r.Files, f)
			continue
		}
		var shown []GrepLine
		matches, lastMatch := 0, 0
		for _, l := range f.Lines {
			if !l.Match {
				size += len(f.Path) + len(l.Text) + 8
				shown = append(shown, l)
				continue
			}
			line := len(f.Path) + len(l.Text) + 8
			if entries >= c.q.limit || size+line > MaxSearchOutputBytes {
				// The context lines since the last match shown that are
				// not its after-context lead to this left-out one.
				for len(shown) > 0 && !shown[len(shown)-1].Match && shown[len(shown)-1].Line > lastMatch+c.q.after {
					shown = shown[:len(shown)-1]
				}
				break
			}
			size += line
			entries++
			matches++
			lastMatch = l.Line
			shown = append(shown, l)
		}
		r.Omitted += f.Count - matches
		if matches == 0 {
			continue
		}
		f.Lines = shown
		r.Files = append(r.Files, f)
	}
	if c.q.mode == GrepContent {
		r.Omitted += c.foldedMatches
	} else {
		r.Omitted += c.foldedFiles
	}
	return r
}

// counted writes n and noun, with an "s" unless n is 1.
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func countMatches(lines []GrepLine) int {
	n := 0
	for _, l := range lines {
		if l.Match {
			n++
		}
	}
	return n
}

// renderGrep is the text a model reads.
func renderGrep(r FSGrepResult) string {
	var b strings.Builder
	if r.TotalFiles == 0 {
		fmt.Fprintf(&b, "No matches for %q in %s", r.Pattern, r.Root)
	}
	prevFile := ""
	for _, f := range r.Files {
		switch r.Mode {
		case GrepFiles:
			b.WriteString(f.Path + "\n")
		case GrepCount:
			fmt.Fprintf(&b, "%s:%d\n", f.Path, f.Count)
		default:
			last := -1
			for _, l := range f.Lines {
				if (last >= 0 && l.Line != last+1) || (last < 0 && prevFile != "" && hasContext(r)) {
					b.WriteString("--\n")
				}
				sep := "-"
				if l.Match {
					sep = ":"
				}
				fmt.Fprintf(&b, "%s%s%d%s%s\n", f.Path, sep, l.Line, sep, l.Text)
				last = l.Line
			}
			prevFile = f.Path
		}
	}
	if r.Omitted > 0 {
		what := "files"
		if r.Mode == GrepContent {
			what = "matching lines"
		}
		fmt.Fprintf(&b, "[truncated: %d more %s not shown (%s in %s in all); narrow path, glob or pattern, or raise limit]\n",
			r.Omitted, what, counted(r.TotalMatches, "matching line"), counted(r.TotalFiles, "file"))
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "[warning: %s]\n", w)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// hasContext reports whether content lines include context, so that
// groups of different files are split by "--" as grep does.
func hasContext(r FSGrepResult) bool {
	for _, f := range r.Files {
		for _, l := range f.Lines {
			if !l.Match {
				return true
			}
		}
	}
	return false
}
