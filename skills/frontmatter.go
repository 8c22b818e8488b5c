package skills

import (
	"fmt"
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"
)

// maxFrontmatter bounds the YAML a skill's frontmatter may hold: it is
// metadata (a name, a description of at most 1,024 characters), and a
// larger block is more likely an alias bomb than a skill.
const maxFrontmatter = 64 << 10

// parseFrontmatter reads SKILL.md frontmatter as YAML, as Bub does
// (yaml.safe_load): a mapping whose keys are lower-cased, and the same
// mapping as written, in JSON terms (see jsonValue). Anything else —
// invalid YAML, a scalar or a list at the top, more than maxFrontmatter
// bytes — is an empty mapping, which makes the skill invalid.
func parseFrontmatter(fm string) (lowered, raw map[string]any) {
	lowered = map[string]any{}
	if len(fm) > maxFrontmatter {
		return lowered, nil
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(fm), &doc); err != nil {
		return lowered, nil
	}
	for k, v := range doc {
		lowered[strings.ToLower(k)] = v
	}
	raw, _ = jsonValue(doc).(map[string]any)
	return lowered, raw
}

// jsonValue turns a decoded YAML value into one encoding/json can encode:
// mappings with non-string keys get their keys in text, timestamps become
// RFC 3339 text, non-finite numbers their YAML spelling.
func jsonValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case float64:
		switch {
		case math.IsNaN(x):
			return ".nan"
		case math.IsInf(x, 1):
			return ".inf"
		case math.IsInf(x, -1):
			return "-.inf"
		}
	}
	return v
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
