package providers

import (
	"context"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/registry"
)

// Scope is a profile's tool scope: glob patterns over runtime names.
type Scope struct {
	// Allow lists the tools in scope; empty means all.
	Allow []string
	// Deny removes tools from the scope; it wins over Allow.
	Deny []string
}

// CheckGlobs reports the first malformed pattern, so bad configuration is
// refused at load time rather than silently matching nothing.
func CheckGlobs(patterns []string) error {
	for _, p := range patterns {
		pat, err := globPattern(p)
		if err != nil {
			return err
		}
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("providers: bad tool pattern %q: %w", p, err)
		}
	}
	return nil
}

// globPattern is a pattern as MatchGlob uses it. CheckGlobs checks the
// same form: lower-casing would turn bytes that are not UTF-8 into U+FFFD,
// making a pattern it refused match names.
func globPattern(p string) (string, error) {
	p = strings.TrimSpace(p)
	switch {
	case p == "":
		return "", fmt.Errorf("providers: empty tool pattern")
	case !utf8.ValidString(p):
		return "", fmt.Errorf("providers: tool pattern %q is not UTF-8", p)
	}
	return strings.ToLower(p), nil
}

// MatchGlob reports whether a runtime name matches a pattern. Patterns use
// path.Match syntax where '*' also crosses dots ("fs.*", "bash*", "*"), and
// a pattern may be written with the model name ("fs_read").
func MatchGlob(pattern, name string) bool {
	pattern, err := globPattern(pattern)
	if err != nil {
		return false
	}
	name = strings.ToLower(name)
	for _, n := range []string{name, registry.ModelName(name)} {
		if ok, _ := path.Match(pattern, n); ok {
			return true
		}
	}
	return false
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if MatchGlob(p, name) {
			return true
		}
	}
	return false
}

// Allowed reports whether a runtime name is in the scope.
func (s Scope) Allowed(name string) bool {
	if len(s.Allow) > 0 && !matchAny(s.Allow, name) {
		return false
	}
	return !matchAny(s.Deny, name)
}

// ScopeProvider keeps the tools a scope allows. scopeOf maps a connection to
// its scope (usually its profile's).
func ScopeProvider(scopeOf func(conn *Connection) Scope) Provider {
	return func(ctx context.Context, conn *Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
		s := scopeOf(conn)
		out := tools[:0:0]
		for _, t := range tools {
			if s.Allowed(t.Name) {
				out = append(out, t)
			}
		}
		return out, "", nil
	}
}
