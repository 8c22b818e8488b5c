package pystub

// Python literals and text: values, numbers, strings, docstrings, comments
// and the rules for names.

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/internal/pyrepr"
)

const (
	// maxLiteralDepth bounds the nesting of a default value; deeper ones
	// are shown as "...".
	maxLiteralDepth = 16
	// maxIntDigits keeps integer literals below Python's 4300-digit limit.
	maxIntDigits = 4000
)

var hardKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true, "def": true,
	"del": true, "elif": true, "else": true, "except": true, "finally": true, "for": true,
	"from": true, "global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true,
	"return": true, "try": true, "while": true, "with": true, "yield": true,
}

var softKeywords = map[string]bool{"_": true, "case": true, "match": true, "type": true}

func isWordByte(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// isParamName reports whether key can be written as a parameter or field
// name: an ASCII identifier that is not a hard keyword.
func isParamName(key string) bool {
	if key == "" || key[0] >= '0' && key[0] <= '9' || hardKeywords[key] {
		return false
	}
	for _, r := range key {
		if !isWordByte(r) {
			return false
		}
	}
	return true
}

// pascal joins the ASCII alphanumeric runs of s, each with its first letter
// upper-cased: "order item" → "OrderItem", "max-results" → "MaxResults".
func pascal(s string) string {
	var sb strings.Builder
	start := true
	for _, r := range s {
		if r < utf8.RuneSelf && isWordByte(r) && r != '_' {
			if start && r >= 'a' && r <= 'z' {
				r -= 'a' - 'A'
			}
			sb.WriteRune(r)
			start = false
		} else {
			start = true
		}
	}
	return sb.String()
}

func normalizeNewlines(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// comment makes s fit on one comment line: whitespace collapsed, invalid
// UTF-8 replaced, and runes that are not graphic (controls, format
// characters) written as Python escapes.
func comment(s string) string {
	var sb strings.Builder
	for _, r := range collapse(s) {
		if unicode.IsGraphic(r) {
			sb.WriteRune(r)
		} else {
			pyrepr.WriteEscape(&sb, r)
		}
	}
	return sb.String()
}

// docstring renders text as a docstring indented by indent, or "" for empty
// text. Backslashes, runs of three quotes and quotes that end the text are
// escaped, so any text yields valid Python.
func docstring(text, indent string) string {
	text = strings.TrimSpace(normalizeNewlines(text))
	if text == "" {
		return ""
	}
	var sb strings.Builder
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '"':
			j := i
			for j < len(text) && text[j] == '"' {
				j++
			}
			if j-i >= 3 || j == len(text) {
				sb.WriteString(strings.Repeat(`\"`, j-i))
			} else {
				sb.WriteString(text[i:j])
			}
			i = j
			continue
		case r == '\\':
			sb.WriteString(`\\`)
		case r == '\n', r == '\t', unicode.IsGraphic(r):
			sb.WriteRune(r)
		default:
			pyrepr.WriteEscape(&sb, r)
		}
		i += size
	}
	lines := strings.Split(sb.String(), "\n")
	if len(lines) == 1 {
		return indent + `"""` + lines[0] + `"""`
	}
	sb.Reset()
	sb.WriteString(indent + `"""` + lines[0] + "\n")
	for _, line := range lines[1:] {
		sb.WriteString(strings.TrimRight(indent+line, " \t") + "\n")
	}
	sb.WriteString(indent + `"""`)
	return sb.String()
}

// pyLiteral writes a JSON value as a Python expression.
func pyLiteral(n *node, depth int) string {
	if depth > maxLiteralDepth {
		return "..."
	}
	switch n.kind {
	case kindNull:
		return "None"
	case kindBool:
		if n.b {
			return "True"
		}
		return "False"
	case kindNumber:
		return pyNumber(n.str)
	case kindString:
		return pyrepr.String(n.str)
	case kindArray:
		parts := make([]string, len(n.items))
		for i, item := range n.items {
			parts[i] = pyLiteral(item, depth+1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	parts := make([]string, len(n.keys))
	for i, k := range n.keys {
		parts[i] = pyrepr.String(k) + ": " + pyLiteral(n.vals[i], depth+1)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func isIntText(s string) bool { return !strings.ContainsAny(s, ".eE") }

// pyNumber renders a JSON number as Python's json module would load and
// repr it: integers exactly, everything else as a float.
func pyNumber(s string) string {
	if isIntText(s) {
		if len(s) > maxIntDigits {
			return "..."
		}
		var z big.Int
		if _, ok := z.SetString(s, 10); ok {
			return z.String()
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return "..."
	}
	return pyFloat(f)
}

// pyFloat formats f like Python's repr: the shortest round-trip digits, in
// positional notation for exponents -4 to 15 and scientific otherwise.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "float('inf')"
	case math.IsInf(f, -1):
		return "-float('inf')"
	case math.IsNaN(f):
		return "float('nan')"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
