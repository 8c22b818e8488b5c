package skills

import (
	"strconv"
	"strings"
)

// parseFrontmatter reads the YAML subset SKILL.md frontmatter uses: a
// mapping of keys (lower-cased) to scalars — plain, quoted, or block (| and
// >) — or to a nested mapping of scalars (metadata). A nested mapping
// comes back as map[string]string; anything else the subset does not
// cover (lists, deeper nesting) as a value that is neither a string nor a
// map[string]string, which makes the skill invalid where it matters.
func parseFrontmatter(fm string) map[string]any {
	lines := strings.Split(strings.ReplaceAll(fm, "\r\n", "\n"), "\n")
	out := map[string]any{}
	for i := 0; i < len(lines); {
		line := lines[i]
		i++
		if isBlankOrComment(line) || indentOf(line) > 0 {
			continue
		}
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(unquote(strings.TrimSpace(key))))
		rest = strings.TrimSpace(rest)
		// The value's continuation: the following lines indented deeper.
		j := i
		for j < len(lines) && (strings.TrimSpace(lines[j]) == "" || indentOf(lines[j]) > 0) {
			j++
		}
		block := lines[i:j]
		i = j
		switch {
		case rest == "":
			out[key] = nestedValue(block)
		case rest[0] == '|' || rest[0] == '>':
			out[key] = blockScalar(block, rest[0] == '>')
		default:
			out[key] = scalar(rest, block)
		}
	}
	return out
}

func isBlankOrComment(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || t[0] == '#'
}

func indentOf(line string) int {
	return len(line) - len(strings.TrimLeft(line, " \t"))
}

// nestedValue parses the indented lines under a key with no inline value:
// nothing (null), a mapping of scalars, or something unsupported.
func nestedValue(block []string) any {
	m := map[string]string{}
	seen := false
	for _, l := range block {
		if isBlankOrComment(l) {
			continue
		}
		seen = true
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "- ") || t == "-" {
			return []string{} // a list: not supported, never a valid field
		}
		k, v, ok := strings.Cut(t, ":")
		if !ok {
			return []string{}
		}
		v = strings.TrimSpace(v)
		if v == "" || v[0] == '|' || v[0] == '>' {
			return []string{} // deeper nesting
		}
		s, _ := scalar(v, nil).(string)
		m[unquote(strings.TrimSpace(k))] = s
	}
	if !seen {
		return nil
	}
	return m
}

// blockScalar joins a literal (|) or folded (>) block, keeping one final
// newline as YAML's default chomping does.
func blockScalar(block []string, folded bool) string {
	indent := -1
	for _, l := range block {
		if strings.TrimSpace(l) != "" {
			indent = indentOf(l)
			break
		}
	}
	var parts []string
	for _, l := range block {
		if len(l) >= indent && indent >= 0 {
			l = l[indent:]
		} else {
			l = strings.TrimSpace(l)
		}
		parts = append(parts, l)
	}
	for len(parts) > 0 && strings.TrimSpace(parts[len(parts)-1]) == "" {
		parts = parts[:len(parts)-1]
	}
	if !folded {
		return strings.Join(parts, "\n") + "\n"
	}
	var b strings.Builder
	for i, p := range parts {
		switch {
		case i == 0:
		case p == "" || parts[i-1] == "":
			b.WriteByte('\n')
		default:
			b.WriteByte(' ')
		}
		b.WriteString(p)
	}
	return b.String() + "\n"
}

// scalar parses an inline value, continued on the indented lines of block
// for plain scalars. "null" and "~" are nil.
func scalar(v string, block []string) any {
	switch v[0] {
	case '"', '\'':
		return unquote(v)
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	for _, l := range block {
		if t := strings.TrimSpace(l); t != "" {
			v += " " + t
		}
	}
	if v == "~" || v == "null" || v == "Null" || v == "NULL" {
		return nil
	}
	return v
}

// unquote removes YAML quotes: ” is a quote inside single quotes; double
// quotes take Go-compatible escapes.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
		return s[1 : len(s)-1]
	}
	return s
}
