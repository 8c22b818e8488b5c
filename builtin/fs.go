package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// fs.read's guards, so one call cannot flood the model's context: a read
// stops after DefaultReadLines lines (unless limit says otherwise) or
// MaxReadBytes bytes, whichever comes first, and says how to read on; a
// line longer than MaxLineChars characters is cut, with a marker.
const (
	DefaultReadLines = 2000
	MaxReadBytes     = 256 << 10
	MaxLineChars     = 2000
)

// readChunk is the most of one line held in memory at a time, so a file
// that is one huge line is streamed, not loaded.
const readChunk = 64 << 10

type fsReadArgs struct {
	Path   string `json:"path" jsonschema_description:"File to read; relative paths resolve against the workspace."`
	Offset int    `json:"offset,omitempty" jsonschema:"default=0" jsonschema_description:"Number of lines to skip (0-based: offset=10 starts at the 11th line)."`
	Limit  *int   `json:"limit,omitempty" jsonschema:"nullable" jsonschema_description:"Most lines to return. Default: 2000. Whatever the limit, a read stops at 256 KiB and cuts lines longer than 2000 characters."`
}

// FSReadResult is fs.read's structured result.
type FSReadResult struct {
	// Path is the absolute path read.
	Path string `json:"path"`
	// Offset is the first line returned (0-based), Lines how many.
	Offset int `json:"offset"`
	Lines  int `json:"lines"`
	// EOF reports that the read reached the end of the file.
	EOF bool `json:"eof"`
	// Content is the lines joined by "\n" (their terminators removed).
	Content string `json:"content"`
	// Truncated says that a guard stopped the read before the file (or
	// the limit) ended: "lines" (the default page of DefaultReadLines)
	// or "bytes" (MaxReadBytes); NextOffset is then where to read on.
	Truncated  string `json:"truncated,omitempty"`
	NextOffset int    `json:"next_offset,omitempty"`
	// CutLines counts lines cut at MaxLineChars characters.
	CutLines int `json:"cut_lines,omitempty"`
}

// renderFSRead is Bub's text (the lines), plus a note when a guard cut
// the read, naming the arguments that read the rest.
func renderFSRead(r FSReadResult) string {
	var notes []string
	switch r.Truncated {
	case "lines":
		notes = append(notes, fmt.Sprintf("[fs.read: showed %d lines from offset %d, the default page; the file goes on. Read on with offset=%d (limit sets the page size)]",
			r.Lines, r.Offset, r.NextOffset))
	case "bytes":
		notes = append(notes, fmt.Sprintf("[fs.read: showed %d lines from offset %d, stopping at the %d KiB limit; the file goes on. Read on with offset=%d (and a smaller limit)]",
			r.Lines, r.Offset, MaxReadBytes>>10, r.NextOffset))
	}
	if r.CutLines > 0 {
		notes = append(notes, fmt.Sprintf("[fs.read: %d lines longer than %d characters were cut; see one whole with bash, e.g. sed -n '<line>p' %s | cut -c 1-20000]",
			r.CutLines, MaxLineChars, shellQuote(r.Path)))
	}
	if len(notes) == 0 {
		return r.Content
	}
	return r.Content + "\n\n" + strings.Join(notes, "\n")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func fsReadTool() *registry.Tool {
	return registry.MustNewTool("fs.read",
		"Read a text file and return its content. Supports optional pagination with offset and limit. "+
			"Returns at most 2000 lines (unless limit says otherwise) and 256 KiB per call, and says how to read on.",
		runFSRead,
		registry.WithPreserve(),
		registry.WithRenderer(renderFSRead),
		registry.WithAnnotations(registry.Annotations{Title: "Read a text file", ReadOnly: true, Idempotent: true}))
}

func runFSRead(ctx context.Context, tc *registry.ToolContext, in fsReadArgs) (FSReadResult, error) {
	// As lax as Bub's lines[max(0, offset):][:max(0, limit)]: a negative
	// offset reads from the start, a negative limit (like 0) reads none.
	in.Offset = max(in.Offset, 0)
	limit := -1
	if in.Limit != nil {
		limit = max(*in.Limit, 0)
	}
	env, err := envOf(tc, "fs.read")
	if err != nil {
		return FSReadResult{}, err
	}
	path, err := env.ResolvePath(in.Path)
	if err != nil {
		return FSReadResult{}, envError(err)
	}
	if o, ok := env.(environment.FileOpener); ok {
		// Stream: a page of a huge file costs the page, not the file.
		f, err := o.OpenFile(ctx, path)
		if err != nil {
			return FSReadResult{}, envError(err)
		}
		defer f.Close()
		return readLines(ctx, f, path, in.Offset, limit)
	}
	text, err := env.ReadText(ctx, path)
	if err != nil {
		e := envError(err)
		if errors.Is(err, environment.ErrTooLarge) {
			e.Message += "; this environment cannot page large files, use bash (e.g. sed -n '1,1000p' FILE)"
		}
		return FSReadResult{}, e
	}
	return readLines(ctx, strings.NewReader(text), path, in.Offset, limit)
}

// readLines returns lines [offset, offset+limit) of r (limit < 0: the
// default page), within fs.read's guards. Lines end at "\n", "\r\n" or
// "\r", as for Python's splitlines. A NUL byte in the first 8 KiB, or
// invalid UTF-8 in a line returned, refuses the file as binary.
func readLines(ctx context.Context, r io.Reader, path string, offset, limit int) (FSReadResult, error) {
	br := bufio.NewReaderSize(r, readChunk)
	if head, _ := br.Peek(binarySniffLen); nulIndex(head) >= 0 {
		return FSReadResult{}, fail(registry.KindInvalidInput,
			"%s is a binary file (NUL byte at offset %d), not text; fs.read returns text only (inspect it with bash, e.g. file or xxd | head)", path, nulIndex(head))
	}
	paged := limit < 0
	if paged {
		limit = DefaultReadLines
	}
	end := offset + min(limit, math.MaxInt-offset) // no overflow for huge limits
	ls := newLineScanner(br)
	res := FSReadResult{Path: path, Offset: offset}
	var b bytes.Buffer // lines go straight in; one over the guard is taken out again
	for line := 0; ; line++ {
		if line%4096 == 0 && ctx.Err() != nil {
			return FSReadResult{}, &registry.Error{Kind: registry.KindTool, Message: "fs.read cancelled", Cause: ctx.Err()}
		}
		if line >= end {
			res.EOF = !ls.more()
			if paged && !res.EOF {
				res.Truncated, res.NextOffset = "lines", line
			}
			break
		}
		keep := line >= offset
		mark := b.Len()
		if keep && res.Lines > 0 {
			b.WriteByte('\n')
		}
		start := b.Len()
		var w *bytes.Buffer
		if keep {
			w = &b
		}
		cut, ok := ls.next(w)
		if !ok {
			b.Truncate(mark)
			res.EOF = true
			break
		}
		if !keep {
			continue
		}
		if !utf8.Valid(b.Bytes()[start:]) {
			return FSReadResult{}, fail(registry.KindInvalidInput, "%s is a binary file (invalid UTF-8 in line %d), not text", path, line)
		}
		if cut > 0 {
			fmt.Fprintf(&b, "… [line cut: %d more characters]", cut)
			res.CutLines++
		}
		if res.Lines > 0 && b.Len() > MaxReadBytes {
			b.Truncate(mark)
			res.Truncated, res.NextOffset = "bytes", line
			break
		}
		res.Lines++
	}
	if err := ls.err; err != nil {
		return FSReadResult{}, fail(registry.KindTool, "read %s: %v", path, err)
	}
	res.Content = b.String()
	return res, nil
}

// lineScanner reads lines of at most MaxLineChars characters from a
// stream, holding no more than readChunk bytes of a longer line.
type lineScanner struct {
	sc *bufio.Scanner
	// partial is set by split when the token it returned is a piece of a
	// line longer than readChunk, not a whole line.
	partial bool
	// peeked holds a token that more read ahead, for next.
	peeked bool
	err    error
}

func newLineScanner(r io.Reader) *lineScanner {
	ls := &lineScanner{}
	ls.sc = bufio.NewScanner(r)
	ls.sc.Buffer(make([]byte, 0, readChunk), 2*readChunk)
	ls.sc.Split(ls.split)
	return ls
}

// split is scanLines, except that a line longer than readChunk comes in
// pieces (cut at a rune boundary), each marked partial.
func (ls *lineScanner) split(data []byte, atEOF bool) (int, []byte, error) {
	ls.partial = false
	adv, tok, err := scanLines(data, atEOF)
	if adv > 0 || tok != nil || err != nil || atEOF || len(data) < readChunk {
		return adv, tok, err
	}
	cut := len(data)
	for j := len(data) - 1; j >= 0 && j >= len(data)-utf8.UTFMax; j-- {
		if utf8.RuneStart(data[j]) {
			if !utf8.FullRune(data[j:]) {
				cut = j
			}
			break
		}
	}
	if cut == len(data) && data[cut-1] == '\r' {
		cut-- // the '\r' may start a "\r\n": leave it to the next call
	}
	ls.partial = true
	return cut, data[:cut], nil
}

// more reports whether another line follows, reading ahead if needed.
func (ls *lineScanner) more() bool {
	if ls.peeked {
		return true
	}
	if ls.sc.Scan() {
		ls.peeked = true
		return true
	}
	ls.err = ls.sc.Err()
	return false
}

// next writes the next line's first MaxLineChars characters to w and
// returns how many more it has; with w nil it only skips the line. ok is
// false at the end of the input (or on an error, left in ls.err).
func (ls *lineScanner) next(w *bytes.Buffer) (cut int, ok bool) {
	if !ls.more() {
		return 0, false
	}
	chars := 0
	for {
		ls.peeked = false
		tok := ls.sc.Bytes()
		if w != nil {
			if room := MaxLineChars - chars; room > 0 {
				i := runeOffset(tok, room)
				w.Write(tok[:i])
				if i < len(tok) || ls.partial {
					chars += utf8.RuneCount(tok[:i])
				}
				cut += utf8.RuneCount(tok[i:])
			} else {
				cut += utf8.RuneCount(tok)
			}
		}
		if !ls.partial {
			return cut, true
		}
		if !ls.sc.Scan() {
			ls.err = ls.sc.Err()
			return cut, true
		}
	}
}

// runeOffset returns the byte offset of the n-th rune of b, or len(b)
// when b has fewer runes.
func runeOffset(b []byte, n int) int {
	if n >= len(b) {
		return len(b) // at most one byte per rune
	}
	i := 0
	for ; n > 0 && i < len(b); n-- {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return i
}

// scanLines splits lines at "\n", "\r\n" and "\r", as Python's
// str.splitlines does for those terminators, dropping the terminator.
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		switch {
		case data[i] == '\n':
			return i + 1, data[:i], nil
		case i+1 < len(data):
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		case atEOF:
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // a '\r' at the end: need to see what follows
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// lineEnd returns where the line starting at byte i of s ends (before its
// terminator) and where the next line starts. cr says whether s contains
// '\r' at all, which lets LF-only text take the fast path.
func lineEnd(s string, i int, cr bool) (end, next int) {
	var j int
	if cr {
		j = strings.IndexAny(s[i:], "\r\n")
	} else {
		j = strings.IndexByte(s[i:], '\n')
	}
	if j < 0 {
		return len(s), len(s)
	}
	end = i + j
	if s[end] == '\r' && end+1 < len(s) && s[end+1] == '\n' {
		return end, end + 2
	}
	return end, end + 1
}

// lineStart returns the byte offset where line n (0-based) of text starts,
// or len(text) when text has fewer lines.
func lineStart(text string, n int) int {
	return skipLines(text, n, strings.IndexByte(text, '\r') >= 0)
}

// lineCount is how many lines text has, as len(text.splitlines()) in
// Python (for "\n", "\r\n" and "\r").
func lineCount(text string) int {
	cr := strings.IndexByte(text, '\r') >= 0
	n := 0
	for i := 0; i < len(text); n++ {
		_, i = lineEnd(text, i, cr)
	}
	return n
}

// skipLines returns where line n of text starts; cr is as for lineEnd.
func skipLines(text string, n int, cr bool) int {
	i := 0
	for line := 0; line < n && i < len(text); line++ {
		_, i = lineEnd(text, i, cr)
	}
	return i
}

type fsWriteArgs struct {
	Path    string `json:"path" jsonschema_description:"File to write; relative paths resolve against the workspace. Missing parent directories are created."`
	Content string `json:"content" jsonschema_description:"The whole new content of the file."`
}

// FSWriteResult is fs.write's structured result.
type FSWriteResult struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

func fsWriteTool() *registry.Tool {
	return registry.MustNewTool("fs.write",
		"Write content to a text file.",
		runFSWrite,
		registry.WithPreserve(),
		registry.WithRenderer(func(r FSWriteResult) string { return "wrote: " + r.Path }),
		registry.WithAnnotations(registry.Annotations{Title: "Write a text file", Destructive: true, Idempotent: true}))
}

func runFSWrite(ctx context.Context, tc *registry.ToolContext, in fsWriteArgs) (FSWriteResult, error) {
	env, err := envOf(tc, "fs.write")
	if err != nil {
		return FSWriteResult{}, err
	}
	path, err := env.ResolvePath(in.Path)
	if err != nil {
		return FSWriteResult{}, envError(err)
	}
	if err := env.WriteText(ctx, path, in.Content); err != nil {
		return FSWriteResult{}, envError(err)
	}
	return FSWriteResult{Path: path, Bytes: len(in.Content)}, nil
}

type fsEditArgs struct {
	Path  string `json:"path" jsonschema_description:"File to edit; relative paths resolve against the workspace."`
	Old   string `json:"old" jsonschema_description:"Exact text to replace; every occurrence from line start on is replaced."`
	New   string `json:"new" jsonschema_description:"Replacement text."`
	Start int    `json:"start,omitempty" jsonschema:"default=0" jsonschema_description:"Line (0-based) to start searching from."`
	// ExpectedReplacements is a pointer so that an explicit 0 is refused
	// rather than taken for "not given".
	ExpectedReplacements *int `json:"expected_replacements,omitempty" jsonschema:"minimum=1" jsonschema_description:"If given, edit only when old occurs exactly this many times (from line start on), else fail saying how many times it occurs, or, when it does not, showing the closest text as a diff. Pass 1 to make sure a single, unique place is edited."`
}

// FSEditResult is fs.edit's structured result.
type FSEditResult struct {
	Path string `json:"path"`
	// Replacements counts the occurrences of old that were replaced.
	Replacements int `json:"replacements"`
}

func fsEditTool() *registry.Tool {
	return registry.MustNewTool("fs.edit",
		"Edit a text file by replacing old text with new text. You can specify the line number to start searching for the old text. "+
			"Every occurrence is replaced, unless expected_replacements is given: then the edit happens only if old occurs exactly that many times.",
		runFSEdit,
		registry.WithPreserve(),
		registry.WithRenderer(func(r FSEditResult) string { return "edited: " + r.Path }),
		registry.WithAnnotations(registry.Annotations{Title: "Edit a text file", Destructive: true}))
}

// runFSEdit replaces every occurrence of old from line start on. Unlike
// Bub, which rejoins the file's lines with "\n", the rest of the file is
// left byte for byte as it was: line endings and the final newline stay.
func runFSEdit(ctx context.Context, tc *registry.ToolContext, in fsEditArgs) (FSEditResult, error) {
	if in.Old == "" {
		return FSEditResult{}, fail(registry.KindInvalidInput, "`old` must not be empty.")
	}
	env, err := envOf(tc, "fs.edit")
	if err != nil {
		return FSEditResult{}, err
	}
	path, err := env.ResolvePath(in.Path)
	if err != nil {
		return FSEditResult{}, envError(err)
	}
	text, err := env.ReadText(ctx, path)
	if err != nil {
		return FSEditResult{}, envError(err)
	}
	if in.Start < 0 {
		// Bub slices lines[:start] and lines[start:]: a negative start
		// counts from the end (-1 is the last line), and one beyond the
		// first line is the whole file.
		in.Start = max(lineCount(text)+in.Start, 0)
	}
	pos := lineStart(text, in.Start)
	rest := text[pos:]
	n := strings.Count(rest, in.Old)
	if in.ExpectedReplacements != nil {
		if err := checkReplacements(text, pos, in, path, n); err != nil {
			return FSEditResult{}, err
		}
	}
	if n == 0 {
		return FSEditResult{}, notFound(in, path)
	}
	if err := env.WriteText(ctx, path, text[:pos]+strings.ReplaceAll(rest, in.Old, in.New)); err != nil {
		return FSEditResult{}, envError(err)
	}
	return FSEditResult{Path: path, Replacements: n}, nil
}

// notFound is Bub's failure for an old text that does not occur.
func notFound(in fsEditArgs, path string) *registry.Error {
	return fail(registry.KindTool, "'%s' not found in %s from line %d", in.Old, path, in.Start)
}

// maxListed is how many occurrences a count mismatch lists by line.
const maxListed = 5

// checkReplacements refuses an edit whose old text occurs n times from
// byte pos of text on, when the caller expected another count. Nothing
// found shows the closest region as a diff; too many found lists where.
func checkReplacements(text string, pos int, in fsEditArgs, path string, n int) *registry.Error {
	want := *in.ExpectedReplacements
	if want < 1 {
		return fail(registry.KindInvalidInput, "`expected_replacements` must be >= 1.")
	}
	switch {
	case n == want:
		return nil
	case n == 0:
		e := notFound(in, path)
		e.Message += " (expected_replacements=" + strconv.Itoa(want) + ")\n" + nearMiss(text, in.Start, in.Old, path)
		return e
	}
	lines := occurrenceLines(text, pos, in.Old, maxListed)
	where := joinInts(lines)
	if n > len(lines) {
		where += fmt.Sprintf(" and %d more", n-len(lines))
	}
	hint := fmt.Sprintf("set expected_replacements=%d to replace all %d, or change old", n, n)
	if want == 1 {
		hint = fmt.Sprintf("include more of the surrounding text in old so that it occurs once, or set expected_replacements=%d to replace all %d", n, n)
	}
	return fail(registry.KindTool, "expected %d %s of old in %s from line %d, found %d: at line%s %s (1-based); %s. The file was not changed.",
		want, plural(want, "occurrence", "occurrences"), path, in.Start, n, plural(len(lines), "", "s"), where, hint)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// occurrenceLines returns the 1-based lines where the first max
// non-overlapping occurrences of old from byte pos of text on start.
func occurrenceLines(text string, pos int, old string, max int) []int {
	var lines []int
	line, at := 1, 0 // line is the line number of byte at
	for len(lines) < max {
		i := strings.Index(text[pos:], old)
		if i < 0 {
			break
		}
		i += pos
		line += lineBreaks(text[at:i])
		at = i
		lines = append(lines, line)
		pos = i + len(old)
	}
	return lines
}

// lineBreaks counts the line terminators in s ("\n", "\r\n", "\r"), as
// lineEnd splits lines.
func lineBreaks(s string) int {
	return strings.Count(s, "\n") + strings.Count(s, "\r") - strings.Count(s, "\r\n")
}
