package agent

import (
	"errors"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// maxHistory bounds the lines a LineEditor remembers.
const maxHistory = 1000

// keyInterrupt stands in for Ctrl-C inside the editor: x/term ends
// ReadLine on Ctrl-C whatever the line holds, while a shell (and this
// REPL) discards a half-typed line and asks again, and exits only on an
// empty one. The byte (Ctrl-\, SIGQUIT's key in cooked mode) reaches the
// completion callback, which sees the line.
const keyInterrupt = 0x1c

// ErrLineDiscarded is returned by ReadLine when Ctrl-C discarded a
// half-typed line; the caller asks again.
var ErrLineDiscarded = errors.New("line discarded")

// LineEditor reads lines from a terminal with editing and history (the
// arrow keys, Ctrl-A/E/K/U/W, as golang.org/x/term provides them). The
// terminal is in raw mode only while a line is read, so what runs between
// lines prints normally and Ctrl-C then interrupts (SIGINT).
type LineEditor struct {
	in   *os.File
	t    *term.Terminal
	raw  *term.State // the mode to restore while a line is being read
	hist *history
	// cut is set by the completion callback when Ctrl-C arrived: ok, and
	// whether the line held anything.
	mu               sync.Mutex
	cut, cutNonEmpty bool
}

// NewLineEditor returns an editor on in (a terminal) writing to out;
// false when in or out is not a terminal.
func NewLineEditor(in, out *os.File) (*LineEditor, bool) {
	if !term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(out.Fd())) {
		return nil, false
	}
	e := &LineEditor{in: in, hist: &history{}}
	e.t = term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{interruptReader{in}, out}, "")
	e.t.History = e.hist
	e.t.AutoCompleteCallback = func(line string, pos int, key rune) (string, int, bool) {
		if key != keyInterrupt {
			return "", 0, false
		}
		e.mu.Lock()
		e.cut, e.cutNonEmpty = true, line != ""
		e.mu.Unlock()
		return "", 0, true
	}
	return e, true
}

// ReadLine shows prompt and returns the line typed. Ctrl-D on an empty
// line and Ctrl-C on an empty line return io.EOF; Ctrl-C on a non-empty
// one returns ErrLineDiscarded.
func (e *LineEditor) ReadLine(prompt string) (string, error) {
	fd := int(e.in.Fd())
	if w, h, err := term.GetSize(fd); err == nil {
		e.t.SetSize(w, h)
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	e.raw, e.cut = old, false
	e.mu.Unlock()
	defer e.Close()
	e.t.SetPrompt(prompt)
	line, err := e.t.ReadLine()
	e.mu.Lock()
	cut, nonEmpty := e.cut, e.cutNonEmpty
	e.mu.Unlock()
	switch {
	case cut && nonEmpty:
		return "", ErrLineDiscarded
	case cut:
		return "", io.EOF
	}
	return line, err
}

// Close gives the terminal back its mode if a read left it raw (the
// REPL ending while a line is being read).
func (e *LineEditor) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.raw != nil {
		_ = term.Restore(int(e.in.Fd()), e.raw)
		e.raw = nil
	}
}

// History returns the lines read, oldest first.
func (e *LineEditor) History() []string { return e.hist.lines() }

// interruptReader turns Ctrl-C into keyInterrupt followed by Enter, so
// ReadLine returns to its caller, which then knows what the line held.
type interruptReader struct{ r io.Reader }

func (r interruptReader) Read(p []byte) (int, error) {
	if len(p) < 2 {
		return r.r.Read(p)
	}
	n, err := r.r.Read(p[:len(p)/2]) // room to grow each ^C into two bytes
	out := make([]byte, 0, 2*n)
	for _, b := range p[:n] {
		if b == 3 {
			out = append(out, keyInterrupt, '\r')
			continue
		}
		out = append(out, b)
	}
	return copy(p, out), err
}

// history is the editor's term.History: bounded, without empty lines or
// immediate repeats.
type history struct {
	mu    sync.Mutex
	items []string // oldest first
}

func (h *history) Add(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s == "" || (len(h.items) > 0 && h.items[len(h.items)-1] == s) {
		return
	}
	if len(h.items) == maxHistory {
		h.items = h.items[1:]
	}
	h.items = append(h.items, s)
}

func (h *history) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.items)
}

func (h *history) At(i int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.items[len(h.items)-1-i]
}

func (h *history) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.items...)
}
