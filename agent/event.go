package agent

import (
	"github.com/bubbuild/bub-mcp/agent/model"
)

// EventKind names what happened in a turn.
type EventKind string

// The events of a turn, in the order they occur. Text and reasoning
// deltas stream while the model writes; tool_call, tool_result and usage
// follow each step that called tools; final ends a successful turn and
// error a failed one. A comma command emits the same: its output as one
// text event, then final (or error), both naming the command.
const (
	EventStep       EventKind = "step"
	EventText       EventKind = "text"
	EventReasoning  EventKind = "reasoning"
	EventToolCall   EventKind = "tool_call"
	EventToolResult EventKind = "tool_result"
	EventUsage      EventKind = "usage"
	EventRetry      EventKind = "retry"
	EventHandoff    EventKind = "handoff"
	EventError      EventKind = "error"
	EventFinal      EventKind = "final"
)

// Event is one thing a renderer shows. Its JSON form is what `bub-mcp
// agent --json` prints, one object per line.
type Event struct {
	Kind EventKind `json:"kind"`
	// Step is the model call the event belongs to, from 1.
	Step int `json:"step,omitempty"`
	// Delta is a text or reasoning fragment.
	Delta string `json:"delta,omitempty"`
	// Text is the final answer (final), a command's output included.
	Text      string           `json:"text,omitempty"`
	ToolCalls []model.ToolCall `json:"tool_calls,omitempty"`
	Results   []ToolResult     `json:"tool_results,omitempty"`
	// Usage is the step's (usage) or the turn's (final) token count.
	Usage *model.Usage `json:"usage,omitempty"`
	// Error describes a failure (error), a retried one (retry) or the
	// reason of an automatic handoff (handoff).
	Error string `json:"error,omitempty"`
	// Attempt counts model call attempts (retry).
	Attempt int `json:"attempt,omitempty"`
	// Name is a command's name (the final or error event of a command).
	Name string `json:"name,omitempty"`
}

// ToolResult is the outcome of one tool call of a step.
type ToolResult struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Output is what the model reads: the rendered text, or the error as
	// {kind, message, details} JSON.
	Output    string `json:"output"`
	Status    string `json:"status"` // "ok" or "error"
	ElapsedMS int64  `json:"elapsed_ms"`
}

// Sink receives a turn's events, in order, from one goroutine at a time.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

type discard struct{}

func (discard) Emit(Event) {}
