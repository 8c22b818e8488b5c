package builtin

import (
	"path"
	"regexp"
	"strings"
)

// A small .gitignore matcher, written here rather than taken from a
// library: the served ones either stopped being maintained
// (sabhiram/go-gitignore, without nested files) or come with all of
// go-git, and fs.grep needs exactly ripgrep's reading of the format
// (crates/ignore/src/gitignore.rs), so that its Go walker and ripgrep
// agree. What it follows:
//
//   - blank lines and lines starting with "#" are skipped; trailing
//     whitespace is dropped unless the line ends in "\ ";
//   - "!" negates (re-includes); "\!" and "\#" start a literal "!" or "#";
//   - a trailing "/" matches directories only;
//   - a pattern with a "/" at its start or in its middle is anchored to
//     the .gitignore's directory, one without matches a name at any depth;
//   - "*", "?" and "[...]" ("[!...]" or "[^...]" negated) never match "/";
//     "**/" at the start, "/**/" inside and "/**" at the end match any
//     number of directories; "**" elsewhere is "*"; "\" escapes;
//   - the last matching line of a file wins, and a deeper .gitignore wins
//     over the ones above it; an ignored directory is not entered, so
//     nothing under it can be re-included (as git).
//
// Not followed: ripgrep's "{a,b}" alternation inside .gitignore (git
// reads braces literally, and so does this matcher).

// ignoreRule is one pattern line of a .gitignore.
type ignoreRule struct {
	re      *regexp.Regexp // matches a slash path relative to the file's directory
	negate  bool
	dirOnly bool
}

// parseIgnore reads the rules of one .gitignore file.
func parseIgnore(text string) []ignoreRule {
	var rules []ignoreRule
	for line := range strings.SplitSeq(text, "\n") {
		if r, ok := parseIgnoreLine(line); ok {
			rules = append(rules, r)
		}
	}
	return rules
}

func parseIgnoreLine(line string) (ignoreRule, bool) {
	if strings.HasPrefix(line, "#") {
		return ignoreRule{}, false
	}
	if !strings.HasSuffix(line, "\\ ") {
		line = strings.TrimRight(line, " \t\r\n\v\f")
	}
	if line == "" {
		return ignoreRule{}, false
	}
	var r ignoreRule
	anchored := false
	switch {
	case strings.HasPrefix(line, `\!`), strings.HasPrefix(line, `\#`):
		line = line[1:]
	default:
		if strings.HasPrefix(line, "!") {
			r.negate = true
			line = line[1:]
		}
		if strings.HasPrefix(line, "/") {
			anchored = true
			line = line[1:]
		}
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly = true
		line = strings.TrimSuffix(line[:len(line)-1], `\`)
	}
	if line == "" {
		return ignoreRule{}, false
	}
	anchored = anchored || strings.Contains(line, "/")
	var b strings.Builder
	b.WriteString("^")
	if !anchored && !strings.HasPrefix(line, "**/") {
		b.WriteString("(?:.*/)?")
	}
	globToRegexp(&b, line)
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		// Only a malformed class can get here; git skips such a line too.
		return ignoreRule{}, false
	}
	r.re = re
	return r, true
}

// globToRegexp writes the regular expression for the gitignore glob g.
func globToRegexp(b *strings.Builder, g string) {
	for i := 0; i < len(g); {
		atStart := i == 0 || g[i-1] == '/'
		switch c := g[i]; {
		case atStart && strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 3
		case atStart && g[i:] == "**":
			b.WriteString(".*")
			i += 2
		case c == '*':
			b.WriteString("[^/]*")
			for i < len(g) && g[i] == '*' {
				i++
			}
		case c == '?':
			b.WriteString("[^/]")
			i++
		case c == '[':
			if n := writeClass(b, g[i:]); n > 0 {
				i += n
			} else {
				b.WriteString(`\[`)
				i++
			}
		case c == '\\' && i+1 < len(g):
			b.WriteString(regexp.QuoteMeta(g[i+1 : i+2]))
			i += 2
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
			i++
		}
	}
}

// writeClass writes the bracket expression at the start of g and returns
// its length, or 0 when it is not closed (then "[" is literal).
func writeClass(b *strings.Builder, g string) int {
	i := 1
	neg := i < len(g) && (g[i] == '!' || g[i] == '^')
	if neg {
		i++
	}
	var body strings.Builder
	first := true
	for ; i < len(g); i++ {
		c := g[i]
		switch {
		case c == ']' && !first:
			if neg {
				b.WriteString("[^/" + body.String() + "]")
			} else {
				b.WriteString("[" + body.String() + "]")
			}
			return i + 1
		case c == '\\' && i+1 < len(g):
			i++
			body.WriteString(regexp.QuoteMeta(g[i : i+1]))
		case c == '-' && !first && i+1 < len(g) && g[i+1] != ']':
			body.WriteByte('-')
		case c == '-':
			body.WriteString(`\-`)
		default:
			body.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
		first = false
	}
	return 0
}

// match reports whether the rule matches rel, a slash path relative to
// the rule's .gitignore directory.
func (r ignoreRule) match(rel string, isDir bool) bool {
	if r.dirOnly && !isDir {
		return false
	}
	return r.re.MatchString(rel)
}

// ignoreSet answers whether paths beneath a base directory are ignored by
// the .gitignore files from the base down, reading each file once.
type ignoreSet struct {
	// load returns the content of dir/.gitignore (dir relative to the
	// base, "." for the base itself), or "" when there is none.
	load  func(dir string) string
	cache map[string][]ignoreRule
}

func newIgnoreSet(load func(dir string) string) *ignoreSet {
	return &ignoreSet{load: load, cache: map[string][]ignoreRule{}}
}

func (s *ignoreSet) rules(dir string) []ignoreRule {
	rs, ok := s.cache[dir]
	if !ok {
		rs = parseIgnore(s.load(dir))
		s.cache[dir] = rs
	}
	return rs
}

// ignored reports whether the .gitignore files of rel's parent
// directories ignore rel (a slash path relative to the base) itself; the
// deepest file with a matching line decides.
func (s *ignoreSet) ignored(rel string, isDir bool) bool {
	dir := path.Dir(rel)
	for {
		sub := rel
		if dir != "." {
			sub = rel[len(dir)+1:]
		}
		rs := s.rules(dir)
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].match(sub, isDir) {
				return !rs[i].negate
			}
		}
		if dir == "." {
			return false
		}
		dir = path.Dir(dir)
	}
}

// excluded reports whether the file rel is ignored, itself or through one
// of its parent directories from byte from of rel on: what a walk started
// at rel[:from] that does not enter ignored directories would skip.
func (s *ignoreSet) excluded(rel string, from int) bool {
	for i := from; i < len(rel); i++ {
		if rel[i] == '/' && s.ignored(rel[:i], true) {
			return true
		}
	}
	return s.ignored(rel, false)
}
