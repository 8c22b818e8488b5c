// Package ident checks the names bub-mcp hands to models and writes into
// URLs and files: tool model names, profile names.
package ident

// Word reports whether s matches ^[a-zA-Z0-9_-]{1,64}$, the pattern every
// major model API enforces on tool names, which profile names share. A
// loop, not a regexp: every start checks every tool and profile, and a
// regexp's compile was a visible part of a cold start.
func Word(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
