package builtin

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

type noArgs struct{}

// TapeInfoResult is tape.info's structured result. Unknown values are
// null.
type TapeInfoResult struct {
	Name                   string   `json:"name"`
	Entries                int      `json:"entries"`
	Anchors                int      `json:"anchors"`
	LastAnchor             *string  `json:"last_anchor" jsonschema:"nullable"`
	EntriesSinceLastAnchor int      `json:"entries_since_last_anchor"`
	LastTokenUsage         *int     `json:"last_token_usage" jsonschema:"nullable"`
	LastTokenCacheHitRate  *float64 `json:"last_token_cache_hit_rate" jsonschema:"nullable"`
}

func renderTapeInfo(r TapeInfoResult) string {
	info := sessions.Info{Name: r.Name, Entries: r.Entries, Anchors: r.Anchors, EntriesSinceLastAnchor: r.EntriesSinceLastAnchor,
		LastTokenUsage: r.LastTokenUsage, LastTokenCacheHitRate: r.LastTokenCacheHitRate}
	if r.LastAnchor != nil {
		info.LastAnchor = *r.LastAnchor
	}
	return info.String()
}

func tapeInfoTool() *registry.Tool {
	return registry.MustNewTool("tape.info",
		"Get information about the current tape, such as number of entries and anchors.",
		func(ctx context.Context, tc *registry.ToolContext, _ noArgs) (TapeInfoResult, error) {
			sess, err := sessionOf(tc, "tape.info")
			if err != nil {
				return TapeInfoResult{}, err
			}
			info := sess.Tape().Info()
			r := TapeInfoResult{Name: info.Name, Entries: info.Entries, Anchors: info.Anchors, EntriesSinceLastAnchor: info.EntriesSinceLastAnchor,
				LastTokenUsage: info.LastTokenUsage, LastTokenCacheHitRate: info.LastTokenCacheHitRate}
			if info.LastAnchor != "" {
				r.LastAnchor = &info.LastAnchor
			}
			return r, nil
		},
		registry.WithRenderer(renderTapeInfo),
		registry.WithAnnotations(registry.Annotations{Title: "Tape summary", ReadOnly: true, Idempotent: true}))
}

type tapeSearchArgs struct {
	Query string   `json:"query" jsonschema_description:"The search query string."`
	Limit int      `json:"limit,omitempty" jsonschema:"default=20" jsonschema_description:"Maximum number of search results to return."`
	Start *string  `json:"start,omitempty" jsonschema:"nullable" jsonschema_description:"Optional start date to filter entries (ISO format)."`
	End   *string  `json:"end,omitempty" jsonschema:"nullable" jsonschema_description:"Optional end date to filter entries (ISO format)."`
	Kinds []string `json:"kinds,omitempty" jsonschema:"default=message,default=tool_result" jsonschema_description:"Entry kinds to search: event, anchor, system, message, tool_call, tool_result, error."`
}

// TapeSearchMatch is one tape.search hit: the entry's date and payload.
type TapeSearchMatch struct {
	Date    string          `json:"date"`
	Content json.RawMessage `json:"content"`
}

// TapeSearchResult is tape.search's structured result, newest match
// first. Filtered counts hits dropped because they echo an earlier search.
type TapeSearchResult struct {
	Matches  []TapeSearchMatch `json:"matches"`
	Filtered int               `json:"filtered"`
}

func renderTapeSearch(r TapeSearchResult) string {
	var b strings.Builder
	b.WriteString("[tape.search]: " + strconv.Itoa(len(r.Matches)) + " matches (" + strconv.Itoa(r.Filtered) + " filtered)")
	for _, m := range r.Matches {
		line, err := json.Marshal(m)
		if err != nil {
			continue
		}
		b.WriteByte('\n')
		b.Write(line)
	}
	return b.String()
}

// tapeKinds are the entry kinds a tape holds.
var tapeKinds = []string{"event", "anchor", "system", "message", "tool_call", "tool_result", "error"}

func tapeSearchTool() *registry.Tool {
	return registry.MustNewTool("tape.search",
		"Search for entries in the current tape that match the query. Returns a list of matching entries.",
		runTapeSearch,
		registry.WithRenderer(renderTapeSearch),
		registry.WithAnnotations(registry.Annotations{Title: "Search the tape", ReadOnly: true, Idempotent: true}))
}

func runTapeSearch(ctx context.Context, tc *registry.ToolContext, in tapeSearchArgs) (TapeSearchResult, error) {
	if strings.TrimSpace(in.Query) == "" {
		return TapeSearchResult{}, fail(registry.KindInvalidInput, "`query` must not be empty.")
	}
	if in.Limit < 1 { // when absent, the schema's default (20) applies
		return TapeSearchResult{}, fail(registry.KindInvalidInput, "`limit` must be >= 1.")
	}
	for _, k := range in.Kinds {
		if !slices.Contains(tapeKinds, k) {
			return TapeSearchResult{}, fail(registry.KindInvalidInput, "unknown entry kind %q in `kinds`; use %s", k, strings.Join(tapeKinds, ", "))
		}
	}
	q := sessions.SearchQuery{Query: in.Query, Limit: in.Limit, Kinds: in.Kinds}
	var err error
	if q.Start, err = parseISO("start", in.Start, false); err != nil {
		return TapeSearchResult{}, err
	}
	if q.End, err = parseISO("end", in.End, true); err != nil {
		return TapeSearchResult{}, err
	}
	sess, err := sessionOf(tc, "tape.search")
	if err != nil {
		return TapeSearchResult{}, err
	}
	res := sess.Tape().Search(q)
	out := TapeSearchResult{Matches: make([]TapeSearchMatch, len(res.Matches)), Filtered: res.Filtered}
	for i, m := range res.Matches {
		out.Matches[i] = TapeSearchMatch{Date: m.Date, Content: json.RawMessage(m.Content)}
	}
	return out, nil
}

// parseISO parses an ISO 8601 date or date-time; nil or "" is the zero
// time. A date alone as an end bound means the end of that day. Date-times
// without a zone are UTC, as the tape's dates are.
func parseISO(name string, s *string, end bool) (time.Time, error) {
	if s == nil || strings.TrimSpace(*s) == "" {
		return time.Time{}, nil
	}
	v := strings.TrimSpace(*s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		if end {
			t = t.Add(24*time.Hour - time.Nanosecond)
		}
		return t, nil
	}
	return time.Time{}, fail(registry.KindInvalidInput, "`%s` is not an ISO date or date-time: %q (use e.g. 2026-01-02 or 2026-01-02T15:04:05Z)", name, v)
}

// TapeAnchorsResult is tape.anchors' structured result: the names of the
// last anchors, oldest first.
type TapeAnchorsResult struct {
	Anchors []string `json:"anchors"`
}

func renderTapeAnchors(r TapeAnchorsResult) string {
	if len(r.Anchors) == 0 {
		return "(no anchors)"
	}
	return "- " + strings.Join(r.Anchors, "\n- ")
}

func tapeAnchorsTool() *registry.Tool {
	return registry.MustNewTool("tape.anchors",
		"List anchors in the current tape.",
		func(ctx context.Context, tc *registry.ToolContext, _ noArgs) (TapeAnchorsResult, error) {
			sess, err := sessionOf(tc, "tape.anchors")
			if err != nil {
				return TapeAnchorsResult{}, err
			}
			anchors := sess.Tape().Anchors(sessions.DefaultAnchorLimit)
			r := TapeAnchorsResult{Anchors: make([]string, len(anchors))}
			for i, a := range anchors {
				r.Anchors[i] = a.Name
			}
			return r, nil
		},
		registry.WithRenderer(renderTapeAnchors),
		registry.WithAnnotations(registry.Annotations{Title: "List tape anchors", ReadOnly: true, Idempotent: true}))
}

type tapeHandoffArgs struct {
	Name    string `json:"name,omitempty" jsonschema:"default=handoff" jsonschema_description:"Anchor name."`
	Summary string `json:"summary,omitempty" jsonschema:"default=" jsonschema_description:"What the next context window should know."`
}

// TapeHandoffResult is tape.handoff's structured result.
type TapeHandoffResult struct {
	Anchor string `json:"anchor"`
}

func tapeHandoffTool() *registry.Tool {
	return registry.MustNewTool("tape.handoff",
		"Add a handoff anchor to the current tape.",
		func(ctx context.Context, tc *registry.ToolContext, in tapeHandoffArgs) (TapeHandoffResult, error) {
			sess, err := sessionOf(tc, "tape.handoff")
			if err != nil {
				return TapeHandoffResult{}, err
			}
			if in.Name == "" {
				in.Name = "handoff"
			}
			if err := sess.Tape().Handoff(in.Name, in.Summary); err != nil {
				return TapeHandoffResult{}, fail(registry.KindTool, "tape.handoff: %v", err)
			}
			return TapeHandoffResult{Anchor: in.Name}, nil
		},
		registry.WithRenderer(func(r TapeHandoffResult) string { return "anchor added: " + r.Anchor }),
		registry.WithAnnotations(registry.Annotations{Title: "Add a handoff anchor"}))
}

type tapeResetArgs struct {
	Archive bool `json:"archive,omitempty" jsonschema:"default=false" jsonschema_description:"Keep the old tape as a .bak archive instead of discarding it."`
}

// TapeResetResult is tape.reset's structured result: "ok", or where the
// old tape was archived.
type TapeResetResult struct {
	Message string `json:"message"`
	// Archived is the archive's path; empty when nothing was archived.
	Archived string `json:"archived,omitempty"`
}

func tapeResetTool() *registry.Tool {
	return registry.MustNewTool("tape.reset",
		"Reset the current tape, optionally archiving it.",
		func(ctx context.Context, tc *registry.ToolContext, in tapeResetArgs) (TapeResetResult, error) {
			sess, err := sessionOf(tc, "tape.reset")
			if err != nil {
				return TapeResetResult{}, err
			}
			path, err := sess.Reset(in.Archive)
			if err != nil {
				return TapeResetResult{}, fail(registry.KindTool, "tape.reset: %v", err)
			}
			if path == "" {
				return TapeResetResult{Message: "ok"}, nil
			}
			return TapeResetResult{Message: "Archived: " + path, Archived: path}, nil
		},
		registry.WithRenderer(func(r TapeResetResult) string { return r.Message }),
		registry.WithAnnotations(registry.Annotations{Title: "Reset the tape", Destructive: true}))
}
