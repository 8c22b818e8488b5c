package sessions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
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

// encodeObject renders a payload or meta map as one tape line's JSON
// object: encoding/json with HTML escaping off, since Python writes tapes
// with ensure_ascii=False and Bub must read our lines as its own. A nil map
// is {}.
func encodeObject(v map[string]any) ([]byte, error) {
	if v == nil {
		return []byte("{}"), nil
	}
	return marshal(v)
}

// marshal is json.Marshal without HTML escaping and without the trailing
// newline Encoder adds.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
// tape lines hold, for callers that build entries for
// [Tape.AppendAsyncJSON].
//
// It writes what encoding/json writes for a string with HTML escaping off
// (its appendString), straight into dst: going through an Encoder first
// cost a large result's spill chunks twice their size in buffers (issue
// 26). TestAppendStringMatchesEncoder holds the two to the same bytes.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// encodeLine returns one complete tape line, newline included, with the
// fields in the order of Python's asdict(TapeEntry). It is assembled
// rather than marshalled from a struct: payload and meta are encoded
// already, and having encoding/json validate and compact them again cost
// about 10% of the server's CPU per stdio tool call in make bench (8
// concurrent calls), since the audit trail writes two lines per call.
func encodeLine(id int, kind string, payload, meta []byte, date string) []byte {
	b := make([]byte, 0, len(payload)+len(meta)+len(kind)+len(date)+64)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(id), 10)
	b = append(b, `,"kind":`...)
	b = AppendString(b, kind)
	b = append(b, `,"payload":`...)
	b = append(b, payload...)
	b = append(b, `,"meta":`...)
	b = append(b, meta...)
	b = append(b, `,"date":`...)
	b = AppendString(b, date)
	return append(b, "}\n"...)
}

// lineRoom is the room a draft's prepared line leaves in front for its
// `{"id":N` (N up to 20 digits).
const lineRoom = len(`{"id":`) + 20

// withID writes `{"id":N` into the room in front of line (draft.line)
// and returns the complete line, the same bytes encodeLine writes. The
// room is written again each time, so a backend may build its lines more
// than once (a retried transaction).
func withID(line []byte, id int) []byte {
	var head [lineRoom]byte
	h := strconv.AppendInt(append(head[:0], `{"id":`...), int64(id), 10)
	start := lineRoom - len(h)
	copy(line[start:], h)
	return line[start:]
}

// formatDate renders an entry's date the way tapes have always held it
// (RFC 3339 in UTC, to the nanosecond), so Entry.Time reads it back.
func formatDate(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// errBlankLine marks a line with nothing on it; loaders skip it quietly.
var errBlankLine = errors.New("sessions: blank tape line")

// parseLine decodes one tape line with the rules of Python's
// FileTapeStore.entry_from_payload: an object with an integer id, a string
// kind and an object payload; meta defaults to {}, and a missing date falls
// back to a numeric "timestamp". It never panics on any input.
func parseLine(line []byte) (Entry, error) {
	raw, id, kind, err := parseHeader(line)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{ID: id, Kind: kind}
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
			e.Date = formatDate(time.Unix(int64(sec), int64(frac*1e9)))
		}
	} else {
		e.Date = formatDate(time.Unix(0, 0))
	}
	return e, nil
}

// parseHeader checks a line's shape (an object with an integer id, a
// string kind and an object payload) and returns its fields undecoded.
func parseHeader(line []byte) (map[string]json.RawMessage, int, string, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, 0, "", errBlankLine
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, 0, "", fmt.Errorf("sessions: invalid tape line: %w", err)
	}
	if raw == nil {
		return nil, 0, "", errors.New("sessions: invalid tape line: not an object")
	}
	id, err := strconv.ParseInt(string(bytes.TrimSpace(raw["id"])), 10, 64)
	if err != nil || int64(int(id)) != id {
		return nil, 0, "", errors.New("sessions: invalid tape line: id is not an integer")
	}
	var kind string
	if err := json.Unmarshal(raw["kind"], &kind); err != nil || !isJSONString(raw["kind"]) {
		return nil, 0, "", errors.New("sessions: invalid tape line: kind is not a string")
	}
	if !isJSONObject(raw["payload"]) {
		return nil, 0, "", errors.New("sessions: invalid tape line: payload is not an object")
	}
	return raw, int(id), kind, nil
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
