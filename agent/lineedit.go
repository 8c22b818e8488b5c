package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/internal/lockedfile"
	"github.com/peterh/liner"
	"golang.org/x/term"
)

// HistoryFile is the REPL's history under $BUB_HOME: one line per entry,
// the last maxHistory kept, mode 0600.
const HistoryFile = "agent_history"

// maxHistory bounds the lines a LineEditor remembers and saves; liner
// keeps as many.
const maxHistory = liner.HistoryLimit

// maxHistoryLine bounds one remembered line: longer ones (a pasted
// document) are run but not kept, and skipped when the file is read
// (liner cannot read back a line of 4 KiB or more).
const maxHistoryLine = 4000

// maxHistoryRead bounds what is read of the history file: its tail, as
// much as maxHistory lines of maxHistoryLine bytes can take.
const maxHistoryRead = maxHistory * (maxHistoryLine + 1)

// ErrLineDiscarded is returned by ReadLine when Ctrl-C discarded the line
// being typed (empty or not); the caller asks again.
var ErrLineDiscarded = errors.New("line discarded")

// LineEditor reads the REPL's lines from the terminal with
// github.com/peterh/liner: editing, history on the arrow keys and Ctrl-R
// (reverse search), Tab completion, Ctrl-C discarding the line and
// Ctrl-D on an empty line ending the input. Between lines the terminal
// sends Ctrl-C as SIGINT again, so it interrupts a running turn.
//
// liner drives the process's own stdin and stdout, so the editor exists
// only when in and out are those and both are terminals.
type LineEditor struct {
	st *liner.State

	mu       sync.Mutex
	closed   bool
	histPath string      // "" until SetHistoryFile
	warn     func(error) // told, once, that the history could not be saved
}

// NewLineEditor returns an editor on in and out, which must be os.Stdin
// and os.Stdout on a terminal; false otherwise (a pipe, a file), when the
// REPL reads plain lines.
func NewLineEditor(in, out *os.File) (*LineEditor, bool) {
	if in.Fd() != os.Stdin.Fd() || out.Fd() != os.Stdout.Fd() ||
		!term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(out.Fd())) {
		return nil, false
	}
	st := liner.NewLiner()
	st.SetCtrlCAborts(true)
	st.SetTabCompletionStyle(liner.TabPrints)
	return &LineEditor{st: st}, true
}

// ReadLine shows prompt and returns the line typed. Ctrl-D on an empty
// line returns io.EOF; Ctrl-C returns ErrLineDiscarded. A line is
// remembered (and saved to the history file) unless it is empty, starts
// with a space (as with a shell's ignorespace: type a leading space to
// keep a line out of the history) or is longer than 4000 bytes.
func (e *LineEditor) ReadLine(prompt string) (string, error) {
	line, err := e.st.Prompt(prompt)
	switch {
	case errors.Is(err, liner.ErrPromptAborted):
		return "", ErrLineDiscarded
	case err != nil:
		return "", err
	}
	if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, " ") && len(line) <= maxHistoryLine {
		e.st.AppendHistory(line)
		if err := e.saveHistory(); err != nil {
			e.mu.Lock()
			warn := e.warn
			e.warn = nil // once: the next save will most likely fail alike
			e.mu.Unlock()
			if warn != nil {
				warn(fmt.Errorf("agent: saving the REPL history: %w", err))
			}
		}
	}
	return line, nil
}

// SetCompleter makes Tab complete the line's first word from words(): a
// line starting with one of them is completed to it, several are listed
// on a second Tab.
func (e *LineEditor) SetCompleter(words func() []string) {
	e.st.SetCompleter(func(line string) []string {
		if strings.ContainsAny(line, " \t") {
			return nil
		}
		var out []string
		for _, w := range words() {
			if strings.HasPrefix(w, line) {
				out = append(out, w)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	})
}

// SetHistoryFile reads the history kept at path (its last maxHistory
// usable lines; a missing file is an empty history) and saves the history
// there after each line read. Lines too long or not UTF-8 are skipped.
func (e *LineEditor) SetHistoryFile(path string) error {
	lines, err := readHistory(path)
	if err != nil {
		return fmt.Errorf("agent: reading the REPL history: %w", err)
	}
	e.st.ClearHistory()
	if _, err := e.st.ReadHistory(strings.NewReader(strings.Join(lines, "\n"))); err != nil {
		return fmt.Errorf("agent: reading the REPL history %s: %w", path, err)
	}
	e.mu.Lock()
	e.histPath = path
	e.mu.Unlock()
	return nil
}

// onSaveError sets who is told, once, that saving the history failed.
func (e *LineEditor) onSaveError(f func(error)) {
	e.mu.Lock()
	e.warn = f
	e.mu.Unlock()
}

// readHistory returns the usable lines at the end of the file at path.
func readHistory(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	partial := false
	if st.Size() > maxHistoryRead {
		if _, err := f.Seek(st.Size()-maxHistoryRead, io.SeekStart); err != nil {
			return nil, err
		}
		partial = true // the first line read is a tail
	}
	b, err := io.ReadAll(io.LimitReader(f, maxHistoryRead))
	if err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), maxHistoryRead)
	for sc.Scan() {
		if partial {
			partial = false
			continue
		}
		l := sc.Text()
		if l == "" || len(l) > maxHistoryLine || !utf8.ValidString(l) || strings.ContainsAny(l, "\r\x00") {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) > maxHistory {
		lines = lines[len(lines)-maxHistory:]
	}
	return lines, sc.Err()
}

// saveHistory replaces the history file with the history, readable by
// its owner only; a rename, so a reader never sees half a file.
func (e *LineEditor) saveHistory() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.histPath == "" || e.closed {
		return nil
	}
	var b bytes.Buffer
	if _, err := e.st.WriteHistory(&b); err != nil {
		return err
	}
	return lockedfile.Write(e.histPath, b.Bytes(), 0o600)
}

// Close gives the terminal back the mode it had before the editor. The
// REPL may end while a line is being read; that read then ends with the
// process.
func (e *LineEditor) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		_ = e.st.Close()
	}
}

// History returns the lines remembered, oldest first.
func (e *LineEditor) History() []string {
	var b bytes.Buffer
	if _, err := e.st.WriteHistory(&b); err != nil || b.Len() == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}
