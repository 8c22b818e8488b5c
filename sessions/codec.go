package sessions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Entry is one line of a tape. Payload and Meta are the decoded JSON
// objects; entries handed out by a [Tape] share them with the tape's cache,
// so treat them as read-only.
type Entry struct {
	ID      int            `json:"id"`
	Kind    string         `json:"kind"`
	Payload map[string]any `json:"payload"`
	Meta    map[string]any `json:"meta"`
	Date    string         `json:"date"`
}

// Time parses the entry's date. It reports false for dates this package
// cannot read (a hand-edited line, a naive timestamp).
func (e Entry) Time() (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, e.Date)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// Entry kinds used by Bub. Other kinds are stored and read back unchanged.
const (
	KindMessage    = "message"
	KindSystem     = "system"
	KindAnchor     = "anchor"
	KindToolCall   = "tool_call"
	KindToolResult = "tool_result"
	KindError      = "error"
	KindEvent      = "event"
)

// encodeObject renders a payload or meta map as a JSON object and returns
// it with the in-memory copy the tape keeps: exactly what decoding that
// JSON would give (numbers as float64, slices as []any, maps as
// map[string]any), so entries look the same before and after a restart and
// never alias the caller's maps. Output matches encoding/json with HTML
// escaping off (Python writes with ensure_ascii=False). A nil map is {}.
func encodeObject(v map[string]any) ([]byte, map[string]any, error) {
	return appendObject(make([]byte, 0, 128), v, true)
}

// appendObject appends v as a JSON object to dst and, when keep is set,
// returns its decoded copy (see encodeObject); without keep the copy is
// nil. A nil map is {}.
func appendObject(dst []byte, v map[string]any, keep bool) ([]byte, map[string]any, error) {
	if v == nil {
		var c map[string]any
		if keep {
			c = map[string]any{}
		}
		return append(dst, "{}"...), c, nil
	}
	b, c, err := appendValue(dst, v, 0, keep)
	if err != nil || !keep {
		return b, nil, err
	}
	return b, c.(map[string]any), nil
}

// maxDepth bounds nesting, so a self-referencing map is an error rather
// than a stack overflow (encoding/json reports cycles the same way).
const maxDepth = 1000

// appendValue encodes v and, when keep is set, builds its decoded copy in
// the same walk. The common JSON-shaped types are handled directly; anything else (structs,
// Marshalers, float32, json.Number, …) goes through encoding/json and is
// decoded back, which is slower but exact.
func appendValue(dst []byte, v any, depth int, keep bool) ([]byte, any, error) {
	if depth > maxDepth {
		return nil, nil, errors.New("value nested too deeply (cycle?)")
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil, nil
	case string:
		if !utf8.ValidString(x) {
			break // encoding/json replaces each invalid byte; let it
		}
		return appendJSONString(dst, x), kept(keep, x), nil
	case bool:
		return strconv.AppendBool(dst, x), kept(keep, x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, nil, fmt.Errorf("unsupported value: %v", x)
		}
		return appendFloat(dst, x), kept(keep, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), kept(keep, float64(x)), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), kept(keep, float64(x)), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), kept(keep, float64(x)), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), kept(keep, float64(x)), nil
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), nil, nil
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			if !utf8.ValidString(k) {
				return appendSlow(dst, v, keep)
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var out map[string]any
		if keep {
			out = make(map[string]any, len(x))
		}
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			var c any
			var err error
			if dst, c, err = appendValue(dst, x[k], depth+1, keep); err != nil {
				return nil, nil, err
			}
			if keep {
				out[k] = c
			}
		}
		return append(dst, '}'), out, nil
	case json.RawMessage:
		if !keep && x != nil {
			// Already JSON: compacting validates it and keeps the line one
			// line, without the encode-and-decode round trip.
			buf := bytes.NewBuffer(dst)
			if err := json.Compact(buf, x); err != nil {
				return nil, nil, err
			}
			return buf.Bytes(), nil, nil
		}
	case []any:
		return appendList(dst, x, depth, keep)
	case []string:
		return appendList(dst, x, depth, keep)
	}
	return appendSlow(dst, v, keep)
}

// kept boxes a scalar's decoded copy only when one is wanted: boxing a
// string or number allocates, and the no-copy path (audit entries) is hot.
func kept[T string | bool | float64](keep bool, v T) any {
	if !keep {
		return nil
	}
	return v
}

// appendList encodes a slice element by element, like appendValue.
func appendList[T any](dst []byte, xs []T, depth int, keep bool) ([]byte, any, error) {
	if xs == nil {
		return append(dst, "null"...), nil, nil
	}
	var out []any
	if keep {
		out = make([]any, len(xs))
	}
	dst = append(dst, '[')
	for i, e := range xs {
		if i > 0 {
			dst = append(dst, ',')
		}
		var c any
		var err error
		if dst, c, err = appendValue(dst, e, depth+1, keep); err != nil {
			return nil, nil, err
		}
		if keep {
			out[i] = c
		}
	}
	return append(dst, ']'), out, nil
}

// appendSlow encodes v with encoding/json and decodes the result back.
func appendSlow(dst []byte, v any, keep bool) ([]byte, any, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if !keep {
		return append(dst, b...), nil, nil
	}
	var c any
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, nil, err
	}
	return append(dst, b...), c, nil
}

// appendFloat formats like encoding/json: shortest round-trip digits,
// exponent notation only for very small or large magnitudes.
func appendFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// decodeObject decodes a JSON object into the form the tape keeps in
// memory; null becomes an empty map.
func decodeObject(b []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// AppendString appends s as a JSON string literal, byte for byte what
// tape lines hold (encoding/json with HTML escaping off), for callers that
// build entries for [Tape.AppendAsyncJSON].
func AppendString(dst []byte, s string) []byte { return appendJSONString(dst, s) }

// appendJSONString appends s as a JSON string literal, byte for byte what
// encoding/json (HTML escaping off) writes. Strings needing no escapes are
// copied directly; the rest go through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	simple, high := true, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' {
			simple = false
			break
		}
		high = high || c >= utf8.RuneSelf
	}
	if simple && high {
		// encoding/json also escapes U+2028/U+2029 and replaces invalid UTF-8.
		simple = utf8.ValidString(s) && !strings.ContainsRune(s, '\u2028') && !strings.ContainsRune(s, '\u2029')
	}
	if simple {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b := buf.Bytes()
	return append(dst, b[:len(b)-1]...)
}

// appendLineHead appends a tape line, with the field order Python's
// asdict(TapeEntry) uses, up to the date's characters: the caller appends
// a date that needs no escaping, then appendLineTail.
func appendLineHead(dst []byte, id int, kind string, payload, meta []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, `,"kind":`...)
	dst = appendJSONString(dst, kind)
	dst = append(dst, `,"payload":`...)
	dst = append(dst, payload...)
	dst = append(dst, `,"meta":`...)
	dst = append(dst, meta...)
	return append(dst, `,"date":"`...)
}

func appendLineTail(dst []byte) []byte { return append(dst, "\"}\n"...) }

// errBlankLine marks a line with nothing on it; loaders skip it quietly.
var errBlankLine = errors.New("sessions: blank tape line")

// parseLine decodes one tape line with the rules of Python's
// FileTapeStore.entry_from_payload: an object with an integer id, a string
// kind and an object payload; meta defaults to {}, and a missing date falls
// back to a numeric "timestamp". It never panics on any input.
func parseLine(line []byte) (Entry, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Entry{}, errBlankLine
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return Entry{}, fmt.Errorf("sessions: invalid tape line: %w", err)
	}
	if raw == nil {
		return Entry{}, errors.New("sessions: invalid tape line: not an object")
	}
	var e Entry
	id, err := strconv.ParseInt(string(bytes.TrimSpace(raw["id"])), 10, 64)
	if err != nil || int64(int(id)) != id {
		return Entry{}, errors.New("sessions: invalid tape line: id is not an integer")
	}
	e.ID = int(id)
	if err := json.Unmarshal(raw["kind"], &e.Kind); err != nil || !isJSONString(raw["kind"]) {
		return Entry{}, errors.New("sessions: invalid tape line: kind is not a string")
	}
	if !isJSONObject(raw["payload"]) {
		return Entry{}, errors.New("sessions: invalid tape line: payload is not an object")
	}
	if e.Payload, err = decodeObject(raw["payload"]); err != nil {
		return Entry{}, fmt.Errorf("sessions: invalid tape line: payload: %w", err)
	}
	e.Meta = map[string]any{}
	if isJSONObject(raw["meta"]) {
		if m, err := decodeObject(raw["meta"]); err == nil {
			e.Meta = m
		}
	}
	if d, ok := raw["date"]; ok {
		var s string
		if json.Unmarshal(d, &s) == nil {
			e.Date = s
		}
	} else if ts, ok := raw["timestamp"]; ok {
		var f float64
		if json.Unmarshal(ts, &f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) < 1e15 {
			sec, frac := math.Modf(f)
			e.Date = time.Unix(int64(sec), int64(frac*1e9)).UTC().Format(time.RFC3339Nano)
		}
	} else {
		e.Date = time.Unix(0, 0).UTC().Format(time.RFC3339Nano)
	}
	return e, nil
}

func isJSONString(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '"'
}

func isJSONObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// asInt reads an integer the way Python's isinstance(v, int) would accept
// it from JSON: integral numbers only, never booleans.
func asInt(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		return int(x), true
	case int:
		return x, true
	case int64:
		return int(x), true
	case json.Number:
		n, err := x.Int64()
		return int(n), err == nil
	}
	return 0, false
}
