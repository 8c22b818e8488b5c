package sessions

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bubbuild/bub-mcp/internal/textmatch"
)

// DefaultSearchLimit is tape.search's default number of matches.
const DefaultSearchLimit = 20

// defaultSearchKinds are the entry kinds tape.search looks at unless told
// otherwise: what was said and what tools returned.
var defaultSearchKinds = []string{KindMessage, KindToolResult}

// SearchQuery selects entries for [Tape.Search]. Zero values mean defaults.
type SearchQuery struct {
	// Query is matched case-insensitively; blank matches nothing.
	Query string
	// Limit caps the entries found (before [tape.search] echoes are
	// filtered out); <= 0 means DefaultSearchLimit.
	Limit int
	// Start and End bound the entry date, inclusive; zero means unbounded.
	// With a bound set, entries whose date cannot be parsed are skipped.
	Start, End time.Time
	// Kinds restricts entry kinds; empty means "message" and "tool_result"
	// (what was said and what tools returned), as in Bub.
	Kinds []string
}

// Match is one search hit.
type Match struct {
	ID   int
	Kind string
	Date string
	// Content is the entry payload as compact JSON, so a caller can embed
	// it verbatim (json.RawMessage) in its {"date","content"} output.
	Content string
	// Payload is the decoded payload (shared with the tape; read-only).
	Payload map[string]any
}

// SearchResult holds the matches, newest first, and how many hits were
// dropped because they echo an earlier search ("[tape.search]" in their
// rendering), which would otherwise snowball with every search.
type SearchResult struct {
	Matches  []Match
	Filtered int
}

// Search finds entries whose payload, rendered as YAML-like text and
// lower-cased, contains the query, or — for queries of at least three
// characters — matches it fuzzily (see textmatch.Fuzzy: a WRatio score >= 80
// against the text's words and word windows). It scans newest first,
// considers each distinct rendering once (so repeated messages appear
// once), and stops after Limit hits, as Bub's FileTapeStore does. It
// streams the file backwards: memory is bounded by the hits, not the tape.
func (t *Tape) Search(q SearchQuery) SearchResult {
	needle := strings.ToLower(strings.TrimSpace(q.Query))
	if needle == "" {
		return SearchResult{}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	kinds := q.Kinds
	if len(kinds) == 0 {
		kinds = defaultSearchKinds
	}
	src, err := t.open()
	if err != nil {
		t.store.log.Warn("sessions: searching a tape", "tape", t.name, "error", err)
		return SearchResult{}
	}
	defer src.Close()
	fz := textmatch.NewFuzzy(needle)
	// Renderings already considered, by hash: a search of a long tape
	// keeps 8 bytes per distinct entry, not its text.
	seed := maphash.MakeSeed()
	seen := map[uint64]struct{}{}
	var hits []Entry
	err = src.Backward(func(_, _ int64, line []byte) bool {
		e, err := parseLine(line)
		if err != nil || !slices.Contains(kinds, e.Kind) || !inRange(e, q.Start, q.End) {
			return true
		}
		text := strings.ToLower(renderText(e.Payload))
		key := maphash.String(seed, text)
		if _, dup := seen[key]; dup {
			return true
		}
		seen[key] = struct{}{}
		if strings.Contains(text, needle) || fz.Match(text) {
			hits = append(hits, e)
		}
		return len(hits) < limit
	})
	if err != nil {
		t.store.log.Warn("sessions: searching a tape", "tape", t.name, "error", err)
	}

	var res SearchResult
	for _, e := range hits {
		content := compactJSON(e.Payload)
		if strings.Contains(content, "[tape.search]") || strings.Contains(e.Date, "[tape.search]") {
			res.Filtered++
			continue
		}
		res.Matches = append(res.Matches, Match{ID: e.ID, Kind: e.Kind, Date: e.Date, Content: content, Payload: e.Payload})
	}
	return res
}

func inRange(e Entry, start, end time.Time) bool {
	if start.IsZero() && end.IsZero() {
		return true
	}
	ts, ok := e.Time()
	if !ok {
		return false
	}
	return (start.IsZero() || !ts.Before(start)) && (end.IsZero() || !ts.After(end))
}

func compactJSON(v map[string]any) string {
	b, err := encodeObject(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// renderText renders a payload as block YAML with sorted keys and
// unquoted scalars, close to Python's yaml.safe_dump, which is what Bub
// searches. Strings are written raw, so a phrase spanning lines of a
// message still matches.
func renderText(payload map[string]any) string {
	var b strings.Builder
	writeYAML(&b, payload, 0)
	return b.String()
}

func writeYAML(b *strings.Builder, v any, indent int) {
	pad := func() {
		for range indent {
			b.WriteByte(' ')
		}
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			pad()
			b.WriteString("{}\n")
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			pad()
			b.WriteString(k)
			b.WriteByte(':')
			// Like PyYAML, a list under a key is not indented further.
			ci := indent + 2
			if _, isList := x[k].([]any); isList {
				ci = indent
			}
			writeChild(b, x[k], ci)
		}
	case []any:
		if len(x) == 0 {
			pad()
			b.WriteString("[]\n")
			return
		}
		for _, it := range x {
			pad()
			b.WriteByte('-')
			writeChild(b, it, indent+2)
		}
	default:
		pad()
		writeScalar(b, v)
		b.WriteByte('\n')
	}
}

// writeChild writes the value after "key:" or "-": scalars and empty
// containers on the same line, others on the next lines at indent.
func writeChild(b *strings.Builder, v any, indent int) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			b.WriteByte('\n')
			writeYAML(b, x, indent)
			return
		}
	case []any:
		if len(x) > 0 {
			b.WriteByte('\n')
			writeYAML(b, x, indent)
			return
		}
	}
	b.WriteByte(' ')
	switch x := v.(type) {
	case map[string]any:
		b.WriteString("{}")
	case []any:
		b.WriteString("[]")
	default:
		writeScalar(b, x)
	}
	b.WriteByte('\n')
}

func writeScalar(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		b.WriteString(x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case float64:
		b.WriteString(strconv.FormatFloat(x, 'f', -1, 64))
	case json.Number:
		b.WriteString(x.String())
	default:
		fmt.Fprint(b, x)
	}
}
