package spill

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// readToolName is the tool the hook never spills: its pages are bounded
// already, and spilling one would hide it behind another handle.
const readToolName = "spill.read"

type readArgs struct {
	Handle  string `json:"handle" jsonschema_description:"The handle from the spilled result's reference."`
	Cursor  int    `json:"cursor,omitempty" jsonschema:"default=0" jsonschema_description:"First chunk to read, counted from the start (or from the end with from_end)."`
	Count   int    `json:"count,omitempty" jsonschema:"default=1" jsonschema_description:"Chunks to read (at most 4)."`
	FromEnd bool   `json:"from_end,omitempty" jsonschema:"default=false" jsonschema_description:"Count cursor from the end, to read the tail first."`
}

// ReadResult is spill.read's structured result: one page of a spilled
// tool result. It is sessions.SpillPage with JSON names, so the two
// convert into each other.
type ReadResult struct {
	Handle string `json:"handle"`
	// Bytes and Chunks describe the whole spilled result.
	Bytes  int `json:"bytes"`
	Chunks int `json:"chunks"`
	// First and Last are the chunk indices returned, -1 when none.
	First      int    `json:"first"`
	Last       int    `json:"last"`
	NextCursor int    `json:"next_cursor"`
	Complete   bool   `json:"complete"`
	Content    string `json:"content"`
}

// String renders the page exactly as Bub's spill.read does, which is what
// the model reads.
func (r ReadResult) String() string {
	shown := "none"
	if r.First >= 0 {
		shown = strconv.Itoa(r.First) + "-" + strconv.Itoa(r.Last)
	}
	return fmt.Sprintf("[spilled tool result: %s bytes, %s chunks]\nchunks: %s\nnext_cursor: %d\ncomplete: %t\ncontent:\n%s",
		commas(r.Bytes), commas(r.Chunks), shown, r.NextCursor, r.Complete, r.Content)
}

// ReadTool returns a new spill.read tool, which reads pages of what the
// Hook spilled from the call's session (ToolContext.Session).
func ReadTool() *registry.Tool {
	t := registry.MustNewTool(readToolName,
		"Read bounded chunks from an oversized tool result stored in the current session's spill tape.",
		read,
		registry.WithPreserve(),
		registry.WithRenderer(ReadResult.String),
		registry.WithAnnotations(registry.Annotations{Title: "Read a spilled tool result", ReadOnly: true, Idempotent: true}))
	// A preserved tool answers models in text and is never in the
	// code-mode stub, so an output schema would only make MCP clients
	// receive the structured page next to its text.
	t.OutputSchema = nil
	return t
}

func read(ctx context.Context, tc *registry.ToolContext, in readArgs) (ReadResult, error) {
	if in.Cursor < 0 {
		return ReadResult{}, &registry.Error{Kind: registry.KindInvalidInput, Message: sessions.ErrSpillCursor.Error()}
	}
	if in.Count < 1 {
		return ReadResult{}, &registry.Error{Kind: registry.KindInvalidInput, Message: sessions.ErrSpillCount.Error()}
	}
	if tc == nil || tc.Session == nil {
		return ReadResult{}, &registry.Error{Kind: registry.KindConfig, Message: errNoSession.Error()}
	}
	p, err := tc.Session.ReadSpill(in.Handle, in.Cursor, in.Count, in.FromEnd)
	if err != nil {
		kind := registry.KindTool
		switch {
		case errors.Is(err, sessions.ErrNoSpill):
			kind = registry.KindNotFound
		case errors.Is(err, sessions.ErrSpillCursor), errors.Is(err, sessions.ErrSpillCount):
			kind = registry.KindInvalidInput
		}
		return ReadResult{}, &registry.Error{Kind: kind, Message: err.Error(), Cause: err}
	}
	return ReadResult(p), nil
}
