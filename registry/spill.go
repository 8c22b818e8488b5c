package registry

import (
	"context"
	"log/slog"
	"unicode/utf8"
)

// Spiller stores an oversized result for the call's session and returns the
// text the model reads instead (a reference plus a preview). When storage
// fails it still returns a usable replacement (a truncation notice) along
// with the error, which is only logged.
type Spiller interface {
	Spill(ctx context.Context, tc *ToolContext, tool, text string) (string, error)
}

// SpillHook returns the after hook that keeps huge outputs out of a model's
// context (Bub PRs #274/#278/#306): a rendered result, or a failure's JSON,
// of at least threshold*4 characters is stored by s and replaced by its
// reference. threshold <= 0 disables spilling. Code-mode calls and
// spill.read itself are never spilled.
func SpillHook(threshold int, s Spiller, log *slog.Logger) Hooks {
	if log == nil {
		log = slog.Default()
	}
	limit := threshold * 4
	return Hooks{Name: "spill", After: func(ctx context.Context, call *ToolCall, res *Result) {
		if threshold <= 0 || call.Context.CodeMode || call.Tool.Name == "spill.read" {
			return
		}
		text := res.Text
		if res.Err != nil {
			text = res.Err.JSON()
		}
		if len(text) < limit || utf8.RuneCountInString(text) < limit {
			return
		}
		ref, err := s.Spill(ctx, call.Context, call.Tool.Name, text)
		if err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "tool.spill.failed", slog.String("name", call.Tool.Name), slog.String("error", err.Error()))
		}
		if ref == "" {
			return
		}
		if res.Err != nil {
			res.Err = &Error{Kind: res.Err.Kind, Message: ref, Cause: res.Err}
		} else {
			res.Text = ref
		}
	}}
}
