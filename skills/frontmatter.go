package skills

import (
	"strings"

	"go.yaml.in/yaml/v4"
)

// maxFrontmatter bounds the YAML a skill's frontmatter may hold: it is
// metadata (a name, a description of at most 1,024 characters), and a
// larger block is more likely an alias bomb than a skill.
const maxFrontmatter = 64 << 10

// parseFrontmatter reads SKILL.md frontmatter as YAML, as Bub does
// (yaml.safe_load): a mapping whose keys are lower-cased. Anything else —
// invalid YAML, a scalar or a list at the top, more than maxFrontmatter
// bytes — is an empty mapping, which makes the skill invalid.
func parseFrontmatter(fm string) map[string]any {
	out := map[string]any{}
	if len(fm) > maxFrontmatter {
		return out
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(fm), &doc); err != nil {
		return out
	}
	for k, v := range doc {
		out[strings.ToLower(k)] = v
	}
	return out
}

// stringMap returns v as a map of strings to strings, Bub's rule for
// metadata; ok is false for anything else (numbers and nested values
// included, as pydantic-free Bub refuses them too).
func stringMap(v any) (map[string]string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}
