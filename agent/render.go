package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// TerminalRenderer shows a turn to a human: the model's text streams to
// Out as it arrives; tool calls, their results, retries and errors go to
// Err as one short line each, so Out carries only the answer (scripts can
// pipe it).
type TerminalRenderer struct {
	Out, Err io.Writer
	// Verbose also shows reasoning and token usage.
	Verbose bool
	// Live shows, on Err, a status line while a turn or command runs
	// (what runs, for how long, the last line a tool streamed), redrawn
	// every second and erased before anything else is written. Set it
	// only when Err is a terminal.
	Live bool

	mu      sync.Mutex
	midLine bool // Out does not end in a newline
	status  status
}

// status is the live status line's state.
type status struct {
	label, last string
	start       time.Time
	shown       bool
	stop        chan struct{}
}

// Begin starts the status line of a turn or command (Activity).
func (r *TerminalRenderer) Begin(label string) {
	if !r.Live {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status{label: label, start: time.Now(), stop: make(chan struct{})}
	stop := r.status.stop
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r.mu.Lock()
				if r.status.stop == stop {
					r.drawStatus()
				}
				r.mu.Unlock()
			}
		}
	}()
}

// Progress shows the last line of a tool's streamed output (Activity).
func (r *TerminalRenderer) Progress(message string) {
	if !r.Live {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status.stop == nil {
		return
	}
	lines := strings.Split(strings.TrimRight(message, "\r\n"), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		r.status.last = last
	}
	r.drawStatus()
}

// End erases the status line (Activity).
func (r *TerminalRenderer) End() {
	if !r.Live {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status.stop != nil {
		close(r.status.stop)
	}
	r.clearStatus()
	r.status = status{}
}

// drawStatus writes the status line, unless the model's text is mid-line
// on the same terminal.
func (r *TerminalRenderer) drawStatus() {
	if r.midLine {
		return
	}
	line := fmt.Sprintf("· %s %ds", r.status.label, int(time.Since(r.status.start).Seconds()))
	if r.status.last != "" {
		line += " · " + clip(oneLine(r.status.last), 60)
	}
	fmt.Fprint(r.Err, "\r\x1b[K"+line+" · Ctrl-C cancels")
	r.status.shown = true
}

func (r *TerminalRenderer) clearStatus() {
	if r.status.shown {
		fmt.Fprint(r.Err, "\r\x1b[K")
		r.status.shown = false
	}
}

// Emit renders one event.
func (r *TerminalRenderer) Emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clearStatus()
	switch e.Kind {
	case EventText:
		fmt.Fprint(r.Out, e.Delta)
		r.midLine = !strings.HasSuffix(e.Delta, "\n")
	case EventReasoning:
		if r.Verbose {
			fmt.Fprint(r.Err, e.Delta)
		}
	case EventToolCall:
		r.endLine()
		for _, c := range e.ToolCalls {
			fmt.Fprintf(r.Err, "→ %s %s\n", c.Name, clip(oneLine(c.Arguments), 160))
		}
	case EventToolResult:
		for _, t := range e.Results {
			mark := "←"
			if t.Status != "ok" {
				mark = "✗"
			}
			fmt.Fprintf(r.Err, "%s %s (%d ms) %s\n", mark, t.Name, t.ElapsedMS, clip(oneLine(t.Output), 200))
		}
	case EventUsage:
		if r.Verbose && e.Usage != nil {
			r.endLine()
			fmt.Fprintf(r.Err, "· tokens: %d prompt, %d completion\n", e.Usage.PromptTokens, e.Usage.CompletionTokens)
		}
	case EventRetry:
		r.endLine()
		fmt.Fprintf(r.Err, "! model call failed (attempt %d), retrying: %s\n", e.Attempt, e.Error)
	case EventHandoff:
		r.endLine()
		fmt.Fprintf(r.Err, "! context window exceeded: handed off (anchor auto_handoff/context_overflow) and retrying\n")
	case EventError:
		r.endLine()
		fmt.Fprintf(r.Err, "error: %s\n", e.Error)
	case EventFinal:
		r.endLine()
	}
}

func (r *TerminalRenderer) endLine() {
	if r.midLine {
		fmt.Fprintln(r.Out)
		r.midLine = false
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", "")
	return strings.ReplaceAll(s, "\n", "⏎")
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// JSONRenderer writes every event as one JSON object per line, for
// programs (`bub-mcp agent --json`).
type JSONRenderer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewJSONRenderer returns a renderer writing to w.
func NewJSONRenderer(w io.Writer) *JSONRenderer {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &JSONRenderer{enc: enc}
}

// Emit writes one event.
func (r *JSONRenderer) Emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(e)
}

var (
	_ Activity = (*TerminalRenderer)(nil)
	_ Sink     = (*TerminalRenderer)(nil)
	_ Sink     = (*JSONRenderer)(nil)
)
