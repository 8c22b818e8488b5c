package builtin

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// notFoundExit is the exit status the ripgrep wrapper uses when rg is not
// on the environment's PATH; rg itself exits 0, 1 or 2.
const notFoundExit = 127

// maxRipgrepLine bounds one line of rg's JSON output: a matching line of
// a file of MaxSearchFileBytes, escaped.
const maxRipgrepLine = 2*MaxSearchFileBytes + 64<<10

// ripgrepArgs are the rg arguments for q. Ignore files are limited to
// .gitignore from the search root down, wherever it is (the walker's
// rules); those of the directories between the workspace and the root are
// applied afterwards by the Go filter, which also decides hidden files and
// globs, so that ripgrep can only find more than the walker, never less.
func ripgrepArgs(q *grepQuery) []string {
	// No --sort: it would make rg single-threaded, and the collector
	// orders what it gets anyway.
	args := []string{"--json", "--no-config",
		"--no-require-git", "--no-ignore-parent", "--no-ignore-global", "--no-ignore-exclude", "--no-ignore-dot",
		"--max-filesize", strconv.Itoa(MaxSearchFileBytes), "-g", "!.git"}
	if q.in.Hidden {
		args = append(args, "--hidden")
	}
	if q.in.IgnoreCase {
		args = append(args, "-i")
	}
	if q.in.Literal {
		args = append(args, "-F")
	}
	if q.before > 0 {
		args = append(args, "-B", strconv.Itoa(q.before))
	}
	if q.after > 0 {
		args = append(args, "-A", strconv.Itoa(q.after))
	}
	if g := q.glob; g != nil && g.basename {
		// Only a narrowing: the Go filter checks every path again.
		p := g.pattern
		if g.negate {
			p = "!" + p
		}
		args = append(args, "-g", p)
	}
	return append(args, "-e", q.in.Pattern, "--", ".")
}

// rgEvent is one line of rg --json.
type rgEvent struct {
	Type string `json:"type"`
	Data struct {
		Path         rgData `json:"path"`
		Lines        rgData `json:"lines"`
		LineNumber   int    `json:"line_number"`
		BinaryOffset *int64 `json:"binary_offset"`
	} `json:"data"`
}

// rgData is rg's arbitrary data: text when it is UTF-8, else base64.
type rgData struct {
	Text  *string `json:"text"`
	Bytes string  `json:"bytes"`
}

func (d rgData) value() []byte {
	if d.Text != nil {
		return []byte(*d.Text)
	}
	b, _ := base64.StdEncoding.DecodeString(d.Bytes)
	return b
}

// grepRipgrep runs rg inside the environment on the scope's directory and
// feeds col. It reports false, with no error, when rg is not on the
// environment's PATH, so the caller can walk instead.
func grepRipgrep(ctx context.Context, sc *searchScope, q *grepQuery, rg string, col *grepCollector, warn *warnings) (bool, error) {
	words := []string{"exec", shellQuote(rg)}
	for _, a := range ripgrepArgs(q) {
		words = append(words, shellQuote(a))
	}
	cmd := fmt.Sprintf("command -v %s >/dev/null 2>&1 || exit %d; %s", shellQuote(rg), notFoundExit, strings.Join(words, " "))
	proc, err := sc.env.Spawn(ctx, environment.Spec{Command: cmd, Dir: sc.root})
	if err != nil {
		return false, envError(err)
	}
	var stderr string
	var wg sync.WaitGroup
	wg.Go(func() {
		b, _ := io.ReadAll(io.LimitReader(proc.Stderr(), 16<<10))
		_, _ = io.Copy(io.Discard, proc.Stderr())
		stderr = string(b)
	})
	parseErr := parseRipgrep(ctx, proc.Stdout(), sc, q, col)
	if parseErr != nil {
		_ = proc.Signal(true)
	}
	_, _ = io.Copy(io.Discard, proc.Stdout())
	code, werr := proc.Wait()
	wg.Wait()
	switch {
	case ctx.Err() != nil:
		return false, &registry.Error{Kind: registry.KindTemporary, Message: "fs.grep cancelled", Cause: ctx.Err()}
	case parseErr != nil:
		return false, parseErr
	case code == notFoundExit:
		return false, nil
	case werr != nil:
		return false, fail(registry.KindTool, "ripgrep: %v", werr)
	case code == 2:
		msg := strings.TrimSpace(stderr)
		if col.empty() {
			// An rg too old for a flag, or a search that found nothing
			// but errors: the walker, where there is one, says more.
			if _, ok := sc.env.(environment.TreeReader); ok {
				first, _, _ := strings.Cut(msg, "\n")
				warn.add("ripgrep failed (%s); searched with the Go walker instead", first)
				return false, nil
			}
			return false, fail(registry.KindTool, "ripgrep failed: %s", msg)
		}
		for line := range strings.SplitSeq(msg, "\n") {
			warn.add("%s", strings.TrimPrefix(line, "rg: "))
		}
	case code != 0 && code != 1:
		return false, fail(registry.KindTool, "ripgrep exited with status %d: %s", code, strings.TrimSpace(stderr))
	}
	return true, nil
}

// parseRipgrep reads rg's JSON lines and hands each finished, non-binary
// file that passes the Go filter to col.
func parseRipgrep(ctx context.Context, r io.Reader, sc *searchScope, q *grepQuery, col *grepCollector) error {
	ig := envIgnores(ctx, sc.env, sc.base)
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), maxRipgrepLine)
	var lines []rawLine
	for s.Scan() {
		var ev rgEvent
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			return fail(registry.KindTool, "ripgrep printed what is not JSON: %v", err)
		}
		switch ev.Type {
		case "begin":
			lines = lines[:0]
		case "match", "context":
			lines = append(lines, rawLine{n: ev.Data.LineNumber, text: ev.Data.Lines.value(), match: ev.Type == "match"})
		case "end":
			if ev.Data.BinaryOffset != nil {
				// A NUL byte: binary, as the walker decides, however much
				// was searched before it.
				continue
			}
			rel := strings.TrimPrefix(string(ev.Data.Path.value()), "./")
			if keepRipgrepPath(sc, q, ig, rel) {
				col.addFile(sc.fromRoot(rel), lines)
			}
			lines = nil
		}
	}
	if err := s.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fail(registry.KindTool, "ripgrep printed a line longer than %d bytes", maxRipgrepLine)
		}
		return fail(registry.KindTool, "reading ripgrep's output: %v", err)
	}
	return nil
}

// keepRipgrepPath applies the walker's rules to a file rg found (rel is
// relative to the search root).
func keepRipgrepPath(sc *searchScope, q *grepQuery, ig *ignoreSet, rel string) bool {
	if gitPath(rel) || (!q.in.Hidden && hiddenPath(rel)) || !q.glob.match(rel) {
		return false
	}
	from := 0
	if sc.rel != "." {
		from = len(sc.rel) + 1
	}
	return !ig.excluded(sc.fromRoot(rel), from)
}
