package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
)

// TerminalRenderer shows a turn to a human: the model's text streams to
// Out as it arrives; tool calls, their results, retries and errors go to
// Err as one short line each, so Out carries only the answer (scripts can
// pipe it).
type TerminalRenderer struct {
	Out, Err io.Writer
	// Verbose also shows reasoning and token usage.
	Verbose bool

	mu      sync.Mutex
	midLine bool // Out does not end in a newline
}

// Emit renders one event.
func (r *TerminalRenderer) Emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
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
	_ Sink = (*TerminalRenderer)(nil)
	_ Sink = (*JSONRenderer)(nil)
)
