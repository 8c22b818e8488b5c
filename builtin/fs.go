package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// MaxPageBytes caps the text one paged fs.read of a file too large to read
// whole may return, and the length of one line in it.
const MaxPageBytes = 1 << 20

type fsReadArgs struct {
	Path   string `json:"path" jsonschema_description:"File to read; relative paths resolve against the workspace."`
	Offset int    `json:"offset,omitempty" jsonschema:"default=0" jsonschema_description:"Number of lines to skip."`
	Limit  *int   `json:"limit,omitempty" jsonschema:"nullable" jsonschema_description:"Most lines to return. Default: to the end of the file."`
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
}

func fsReadTool() *registry.Tool {
	return registry.MustNewTool("fs.read",
		"Read a text file and return its content. Supports optional pagination with offset and limit.",
		runFSRead,
		registry.WithPreserve(),
		registry.WithRenderer(func(r FSReadResult) string { return r.Content }),
		registry.WithAnnotations(registry.Annotations{Title: "Read a text file", ReadOnly: true, Idempotent: true}))
}

func runFSRead(ctx context.Context, tc *registry.ToolContext, in fsReadArgs) (FSReadResult, error) {
	if err := nonNegative("offset", in.Offset); err != nil {
		return FSReadResult{}, err
	}
	limit := -1
	if in.Limit != nil {
		if err := nonNegative("limit", *in.Limit); err != nil {
			return FSReadResult{}, err
		}
		limit = *in.Limit
	}
	env, err := envOf(tc, "fs.read")
	if err != nil {
		return FSReadResult{}, err
	}
	path, err := env.ResolvePath(in.Path)
	if err != nil {
		return FSReadResult{}, envError(err)
	}
	text, err := env.ReadText(ctx, path)
	switch {
	case err == nil:
		content, n, eof := selectLines(text, in.Offset, limit)
		return FSReadResult{Path: path, Offset: in.Offset, Lines: n, EOF: eof, Content: content}, nil
	case !errors.Is(err, environment.ErrTooLarge):
		return FSReadResult{}, envError(err)
	}
	// Too large to read whole: page through it, if the caller asked for a
	// page and the environment is the host.
	e := envError(err)
	if limit < 0 {
		e.Message += fmt.Sprintf("; read it in pages with offset and limit (in lines), e.g. offset=%d limit=1000", in.Offset)
		return FSReadResult{}, e
	}
	if _, local := env.(*environment.LocalEnvironment); !local {
		e.Message += "; this environment cannot page large files, use bash (e.g. sed -n '1,1000p' FILE)"
		return FSReadResult{}, e
	}
	return readPage(ctx, path, in.Offset, limit)
}

// readPage streams lines [offset, offset+limit) of a host file without
// reading the rest, refusing binary files and pages over MaxPageBytes.
func readPage(ctx context.Context, path string, offset, limit int) (FSReadResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return FSReadResult{}, fail(registry.KindTool, "open %s: %v", path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(binarySniffLen); nulIndex(head) >= 0 {
		return FSReadResult{}, fail(registry.KindInvalidInput, "%s is a binary file (NUL byte at offset %d), not text", path, nulIndex(head))
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64<<10), MaxPageBytes)
	sc.Split(scanLines)
	r := FSReadResult{Path: path, Offset: offset}
	end := offset + min(limit, math.MaxInt-offset) // no overflow for huge limits
	var b strings.Builder
	line := 0
	for line < end && sc.Scan() {
		if line%4096 == 0 && ctx.Err() != nil {
			return FSReadResult{}, &registry.Error{Kind: registry.KindTool, Message: "fs.read cancelled", Cause: ctx.Err()}
		}
		line++
		if line <= offset {
			continue
		}
		tok := sc.Bytes()
		if !utf8.Valid(tok) {
			return FSReadResult{}, fail(registry.KindInvalidInput, "%s is a binary file (invalid UTF-8 in line %d), not text", path, line-1)
		}
		if r.Lines > 0 {
			b.WriteByte('\n')
		}
		b.Write(tok)
		r.Lines++
		if b.Len() > MaxPageBytes {
			return FSReadResult{}, fail(registry.KindInvalidInput, "lines %d-%d of %s are more than %d bytes; ask for fewer lines", offset, line-1, path, MaxPageBytes)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return FSReadResult{}, fail(registry.KindInvalidInput, "line %d of %s is longer than %d bytes; it cannot be read with fs.read", line, path, MaxPageBytes)
		}
		return FSReadResult{}, fail(registry.KindTool, "read %s: %v", path, err)
	}
	r.EOF = line < end || !sc.Scan()
	r.Content = b.String()
	return r, nil
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

// selectLines returns lines [offset, offset+limit) of text joined by "\n"
// (limit < 0: to the end), how many there are and whether they reach the
// end of text. Lines end at "\n", "\r\n" or "\r", as for Python's
// splitlines. LF-only text is returned as a substring, without copying.
func selectLines(text string, offset, limit int) (string, int, bool) {
	cr := strings.IndexByte(text, '\r') >= 0
	i := skipLines(text, offset, cr)
	start, last, n := i, i, 0
	var b strings.Builder
	for i < len(text) && (limit < 0 || n < limit) {
		end, next := lineEnd(text, i, cr)
		if cr {
			if n > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(text[i:end])
		}
		last, i = end, next
		n++
	}
	if cr {
		return b.String(), n, i >= len(text)
	}
	return text[start:last], n, i >= len(text)
}

// lineStart returns the byte offset where line n (0-based) of text starts,
// or len(text) when text has fewer lines.
func lineStart(text string, n int) int {
	return skipLines(text, n, strings.IndexByte(text, '\r') >= 0)
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
}

// FSEditResult is fs.edit's structured result.
type FSEditResult struct {
	Path string `json:"path"`
	// Replacements counts the occurrences of old that were replaced.
	Replacements int `json:"replacements"`
}

func fsEditTool() *registry.Tool {
	return registry.MustNewTool("fs.edit",
		"Edit a text file by replacing old text with new text. You can specify the line number to start searching for the old text.",
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
	if err := nonNegative("start", in.Start); err != nil {
		return FSEditResult{}, err
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
	pos := lineStart(text, in.Start)
	rest := text[pos:]
	n := strings.Count(rest, in.Old)
	if n == 0 {
		return FSEditResult{}, fail(registry.KindTool, "'%s' not found in %s from line %d", in.Old, path, in.Start)
	}
	if err := env.WriteText(ctx, path, text[:pos]+strings.ReplaceAll(rest, in.Old, in.New)); err != nil {
		return FSEditResult{}, envError(err)
	}
	return FSEditResult{Path: path, Replacements: n}, nil
}
