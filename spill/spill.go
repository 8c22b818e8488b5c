// Package spill keeps oversized tool results out of a model's context: an
// after hook stores a huge result in the session's spill sidecar
// (sessions.Session.Spill) and shows the model a reference and a preview
// instead, and the spill.read tool pages the result back in bounded
// chunks. Storage is package sessions' job; this package decides when to
// spill and what the model reads, in Bub's words.
//
// It comes as the module "spill", which registers itself from init(); a
// binary enables it with a blank import:
//
//	import _ "github.com/bubbuild/bub-mcp/spill"
package spill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/internal/pyrepr"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// DefaultThreshold is the spill threshold when neither [tools]
// spill_threshold nor BUB_SPILL_THRESHOLD sets one, as in Bub.
const DefaultThreshold = 4096

// PreviewChars is the most characters of a spilled result shown inline
// next to its reference, as in Bub.
const PreviewChars = 600

// errNoSession is what the model reads when a call has no session to
// spill into or read from: Bub's exact text, punctuation included.
//
//lint:ignore ST1005 Bub's exact message to the model
var errNoSession = errors.New("spill sidecar unavailable in this context.")

// Hook returns the after hook that keeps huge outputs out of a model's
// context (Bub PRs #274/#278/#306): a rendered result, or a failure's JSON,
// of at least threshold*4 characters is stored in the call's session
// (ToolContext.Session) and replaced by its Reference. threshold <= 0
// disables spilling. Code-mode calls and spill.read itself are never
// spilled: their results go to code, not to a model, or are already
// bounded. When storing fails the model reads a Failure notice instead,
// and the error is logged to log (nil means slog.Default()).
func Hook(threshold int, log *slog.Logger) registry.Hooks {
	if log == nil {
		log = slog.Default()
	}
	limit := threshold * 4
	return registry.Hooks{Name: "spill", After: func(ctx context.Context, call *registry.ToolCall, res *registry.Result) {
		if threshold <= 0 || call.Context.CodeMode || call.Tool.Name == readToolName {
			return
		}
		text := res.Text
		if res.Err != nil {
			text = res.Err.JSON()
		}
		if len(text) < limit || utf8.RuneCountInString(text) < limit {
			return
		}
		ref, err := store(call.Context.Session, call.Tool.Name, text)
		if err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "tool.spill.failed", slog.String("name", call.Tool.Name), slog.String("error", err.Error()))
		}
		if res.Err != nil {
			res.Err = &registry.Error{Kind: res.Err.Kind, Message: ref, Cause: res.Err}
		} else {
			res.Text = ref
		}
	}}
}

// store spills text into sess and returns what the model reads instead:
// the reference, or the failure notice along with the reason.
func store(sess registry.Session, tool, text string) (string, error) {
	if sess == nil {
		return Failure(text), errNoSession
	}
	ref, err := sess.Spill(tool, text)
	if err != nil {
		return Failure(text), fmt.Errorf("spill: %s: %w", tool, err)
	}
	return Reference(ref, text), nil
}

// Reference is the text the model reads instead of a spilled result:
// where it went, how to read it back with spill.read, and a preview.
func Reference(ref sessions.SpillRef, text string) string {
	return "[tool output spilled: " + commas(ref.Bytes) + " bytes in " + commas(ref.Chunks) +
		" chunks; handle: " + ref.Handle + "]\n" +
		"[read with: spill_read(handle=" + pyrepr.String(ref.Handle) + ", cursor=0, count=1, from_end=False)]\n" +
		preview(text)
}

// Failure is the text the model reads when a large result could not be
// spilled: its size and a preview, so the context stays bounded even
// then.
func Failure(text string) string {
	return "[tool output truncated: " + commas(len(strings.ToValidUTF8(text, "\uFFFD"))) +
		" bytes; spill storage failed]\n" + preview(text)
}

// preview keeps text up to PreviewChars characters, else its first and
// last 300 with the number of characters left out.
func preview(text string) string {
	n := utf8.RuneCountInString(text)
	if n <= PreviewChars {
		return text
	}
	head := PreviewChars / 2
	tail := PreviewChars - head
	hi, ti := 0, len(text)
	for range head {
		_, w := utf8.DecodeRuneInString(text[hi:])
		hi += w
	}
	for range tail {
		_, w := utf8.DecodeLastRuneInString(text[:ti])
		ti -= w
	}
	return text[:hi] + "\n...[" + commas(n-PreviewChars) + " chars omitted]...\n" + text[ti:]
}

// commas formats n with thousands separators, like Python's "{:,}", as
// Bub's messages do.
func commas(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
