package mcpserver

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// envelope is what the stdio read loop needs of a message to route it.
type envelope struct {
	ID     json.RawMessage          `json:"id"`
	Method string                   `json:"method"`
	Result json.RawMessage          `json:"result"`
	Error  *mcp.JSONRPCErrorDetails `json:"error"`
}

// parseEnvelope reads a message's routing members. Most messages are read
// by a scan of the top level only, which is several times cheaper than
// json.Unmarshal (HandleMessage decodes the message fully anyway); a
// message the scan does not take (escapes in keys or the method, an error
// member, anything malformed) goes through json.Unmarshal, whose verdict
// stands.
func parseEnvelope(b []byte) (envelope, error) {
	if env, ok := scanEnvelope(b); ok {
		return env, nil
	}
	var env envelope
	err := json.Unmarshal(b, &env)
	return env, err
}

// scanEnvelope is parseEnvelope's fast path; ok is false when it cannot
// vouch for the result.
func scanEnvelope(b []byte) (env envelope, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return env, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return env, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return env, false
		}
		end := skipString(b, i)
		if end < 0 {
			return env, false
		}
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return env, false
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return env, false
		}
		i = skipSpace(b, i+1)
		vend := skipValue(b, i)
		if vend < 0 {
			return env, false
		}
		v := b[i:vend]
		switch string(key) {
		case "id":
			env.ID = v
		case "method":
			if v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
				return env, false
			}
			env.Method = string(v[1 : len(v)-1])
		case "result":
			env.Result = v
		case "error":
			return env, false // rare; let encoding/json decode it
		default:
			// encoding/json matches member names case-insensitively.
			for _, k := range [...]string{"id", "method", "result", "error"} {
				if bytes.EqualFold(key, []byte(k)) {
					return env, false
				}
			}
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return env, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return env, skipSpace(b, i+1) == len(b)
		default:
			return env, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] (a
// quote), or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index after the value starting at b[i], or -1.
// Nested values are only balanced, not validated: HandleMessage decodes
// them.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end := skipString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && !endsLiteral(b[j]) {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

func endsLiteral(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}
