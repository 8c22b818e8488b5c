package builtin

import (
	"context"
	"errors"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

type spillReadArgs struct {
	Handle  string `json:"handle" jsonschema_description:"The handle from the spilled result's reference."`
	Cursor  int    `json:"cursor,omitempty" jsonschema:"default=0" jsonschema_description:"First chunk to read, counted from the start (or from the end with from_end)."`
	Count   int    `json:"count,omitempty" jsonschema:"default=1" jsonschema_description:"Chunks to read (at most 4)."`
	FromEnd bool   `json:"from_end,omitempty" jsonschema:"default=false" jsonschema_description:"Count cursor from the end, to read the tail first."`
}

// SpillReadResult is spill.read's structured result: one page of a spilled
// tool result. It is sessions.SpillPage with JSON names, so the two convert
// into each other.
type SpillReadResult struct {
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

func spillReadTool() *registry.Tool {
	return registry.MustNewTool("spill.read",
		"Read bounded chunks from an oversized tool result stored in the current session's spill tape.",
		runSpillRead,
		registry.WithPreserve(),
		registry.WithRenderer(func(r SpillReadResult) string { return sessions.SpillPage(r).String() }),
		registry.WithAnnotations(registry.Annotations{Title: "Read a spilled tool result", ReadOnly: true, Idempotent: true}))
}

func runSpillRead(ctx context.Context, tc *registry.ToolContext, in spillReadArgs) (SpillReadResult, error) {
	if in.Cursor < 0 {
		return SpillReadResult{}, &registry.Error{Kind: registry.KindInvalidInput, Message: sessions.ErrSpillCursor.Error()}
	}
	if in.Count < 1 {
		return SpillReadResult{}, &registry.Error{Kind: registry.KindInvalidInput, Message: sessions.ErrSpillCount.Error()}
	}
	sess, ok := sessions.FromContext(ctx)
	if !ok {
		return SpillReadResult{}, &registry.Error{Kind: registry.KindConfig, Message: sessions.ErrNoSpillSidecar.Error()}
	}
	p, err := sess.ReadSpill(in.Handle, in.Cursor, in.Count, in.FromEnd)
	if err != nil {
		kind := registry.KindTool
		switch {
		case errors.Is(err, sessions.ErrNoSpill):
			kind = registry.KindNotFound
		case errors.Is(err, sessions.ErrSpillCursor), errors.Is(err, sessions.ErrSpillCount):
			kind = registry.KindInvalidInput
		}
		return SpillReadResult{}, &registry.Error{Kind: kind, Message: err.Error(), Cause: err}
	}
	return SpillReadResult(p), nil
}
