// Package pyrepr quotes strings the way Python's repr(str) does, because
// Bub's messages to models embed values with !r and its code-mode stubs
// are Python source: both must read exactly as Bub writes them.
package pyrepr

import (
	"fmt"
	"strings"
	"unicode"
)

// String returns Python's repr of s: single quotes unless s holds a single
// quote and no double one, backslash escapes for the quote, backslash,
// \n, \r and \t, and \x, \u or \U escapes for other unprintable runes.
func String(s string) string {
	quote := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var sb strings.Builder
	sb.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == quote || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == ' ' || unicode.IsPrint(r):
			sb.WriteRune(r)
		default:
			WriteEscape(&sb, r)
		}
	}
	sb.WriteRune(quote)
	return sb.String()
}

// WriteEscape writes r as a Python escape sequence: \xNN, \uNNNN or
// \UNNNNNNNN, the shortest that holds it.
func WriteEscape(sb *strings.Builder, r rune) {
	switch {
	case r <= 0xff:
		fmt.Fprintf(sb, `\x%02x`, r)
	case r <= 0xffff:
		fmt.Fprintf(sb, `\u%04x`, r)
	default:
		fmt.Fprintf(sb, `\U%08x`, r)
	}
}
