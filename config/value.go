package config

import (
	"strings"

	"github.com/BurntSushi/toml"
)

// Value returns the setting at a dotted path ("agent.model",
// "profiles.default.workspace") as the file has it, for templates such
// as a skill's ${config.agent.model}. The [auth] table is never
// returned: token hashes and variable names stay out of model-facing
// text. It reads the source again and marks nothing as decoded, so it
// cannot hide a misspelt key from Check.
func (c *Config) Value(path string) (any, bool) {
	keys := strings.Split(path, ".")
	if len(keys) == 0 || keys[0] == "" || strings.EqualFold(keys[0], "auth") || c.src == "" {
		return nil, false
	}
	var tree map[string]any
	if _, err := toml.Decode(c.src, &tree); err != nil {
		return nil, false
	}
	var v any = tree
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}
