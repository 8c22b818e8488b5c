package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
	"github.com/tailscale/hujson"
)

// mergeJSONC sets doc[key][name] = entry in a JSON file that may hold
// comments and trailing commas (VS Code's and Gemini CLI's settings
// commonly do), editing its syntax tree so that everything else —
// comments, commas, indentation, number literals — stays byte for byte.
// The entry is indented as the file is.
func mergeJSONC(old []byte, key, name string, entry map[string]any) ([]byte, error) {
	src := old
	if len(bytes.TrimSpace(src)) == 0 {
		src = []byte("{}\n")
	}
	root, err := hujson.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("is not valid JSON (fix or move it, then run install again): %w", err)
	}
	obj, ok := root.Value.(*hujson.Object)
	if !ok {
		return nil, errors.New("is not a JSON object (fix or move it, then run install again)")
	}
	unit := indentUnit(obj)
	i := memberIndex(obj, key)
	if i < 0 {
		if err := setMember(obj, "", unit, key, map[string]any{name: entry}); err != nil {
			return nil, err
		}
		return root.Pack(), nil
	}
	servers, ok := obj.Members[i].Value.Value.(*hujson.Object)
	if !ok {
		return nil, fmt.Errorf("has a %q that is not a table of servers", key)
	}
	if err := setMember(servers, memberIndent(obj, i, "", unit), unit, name, entry); err != nil {
		return nil, err
	}
	return root.Pack(), nil
}

// memberIndex finds a member by name; -1 when absent.
func memberIndex(obj *hujson.Object, name string) int {
	for i, m := range obj.Members {
		var n string
		if lit, ok := m.Name.Value.(hujson.Literal); ok && json.Unmarshal(lit, &n) == nil && n == name {
			return i
		}
	}
	return -1
}

// indentUnit guesses the file's indentation from the top object's first
// member ("  " when it cannot tell).
func indentUnit(obj *hujson.Object) string {
	if len(obj.Members) > 0 {
		if ind := lineIndent(obj.Members[0].Name.BeforeExtra); ind != "" {
			return ind
		}
	}
	return "  "
}

// lineIndent is the whitespace after the last newline of extra; "" when
// extra has no newline (a one-line object).
func lineIndent(extra hujson.Extra) string {
	i := bytes.LastIndexByte(extra, '\n')
	if i < 0 {
		return ""
	}
	return string(extra[i+1:])
}

// memberIndent is the indentation of obj's member i, else parent+unit.
func memberIndent(obj *hujson.Object, i int, parent, unit string) string {
	if i >= 0 && i < len(obj.Members) {
		if bytes.IndexByte(obj.Members[i].Name.BeforeExtra, '\n') >= 0 {
			return lineIndent(obj.Members[i].Name.BeforeExtra)
		}
	}
	return parent + unit
}

// setMember replaces obj's member name with value, keeping the comments
// around it, or appends it after the last member, on its own line.
func setMember(obj *hujson.Object, parent, unit, name string, value any) error {
	i := memberIndex(obj, name)
	indent := memberIndent(obj, i, parent, unit)
	if i < 0 && len(obj.Members) > 0 {
		indent = memberIndent(obj, len(obj.Members)-1, parent, unit)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(indent, unit)
	if err := enc.Encode(value); err != nil {
		return err
	}
	v, err := hujson.Parse(bytes.TrimSpace(b.Bytes()))
	if err != nil {
		return err
	}
	if i >= 0 {
		obj.Members[i].Value.Value = v.Value
		return nil
	}
	nameLit, _ := json.Marshal(name)
	m := hujson.ObjectMember{Name: hujson.Value{Value: hujson.Literal(nameLit)}, Value: hujson.Value{BeforeExtra: hujson.Extra(" "), Value: v.Value}}
	// What sat before the closing brace (comments on the last member,
	// the newline and the brace's indentation) is split: the comments
	// stay with the member before, the brace keeps its line.
	after := obj.AfterExtra
	if nl := bytes.LastIndexByte(after, '\n'); nl >= 0 {
		m.Name.BeforeExtra = append(slices.Clone(after[:nl]), "\n"+indent...)
		obj.AfterExtra = slices.Clone(after[nl:])
	} else if len(obj.Members) == 0 {
		m.Name.BeforeExtra = hujson.Extra("\n" + indent)
		obj.AfterExtra = hujson.Extra("\n" + parent)
	} else {
		m.Name.BeforeExtra = append(slices.Clone(after), ' ')
		obj.AfterExtra = nil
	}
	if n := len(obj.Members); n > 0 && obj.Members[n-1].Value.AfterExtra != nil {
		m.Value.AfterExtra = hujson.Extra{} // the file ends its members with a comma
	}
	obj.Members = append(obj.Members, m)
	return nil
}

// tomlHeader matches a table header line, capturing its dotted name.
var tomlHeader = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*\[\[?\s*([^\[\]]*?)\s*\]\]?\s*(#.*)?$`) })

// mergeTOML sets [key.name] in a TOML file (Codex's config.toml) by
// editing its text: the old [key.name] table and its sub-tables are
// replaced in place, or the new one is appended, so that every comment
// elsewhere stays. A server defined otherwise (an inline table, dotted
// keys) is refused rather than rewritten.
func mergeTOML(old []byte, key, name string, entry map[string]any) ([]byte, error) {
	doc := map[string]any{}
	if _, err := toml.Decode(string(old), &doc); err != nil {
		return nil, fmt.Errorf("is not valid TOML (fix or move it, then run install again): %w", err)
	}
	servers, ok := doc[key].(map[string]any)
	if !ok && doc[key] != nil {
		return nil, fmt.Errorf("has a %q that is not a table of servers", key)
	}
	table := tomlTable(key, name, entry)
	lines := strings.SplitAfter(string(old), "\n")
	var out []string
	inserted, skipping := false, false
	for _, line := range lines {
		if m := tomlHeader().FindStringSubmatch(line); m != nil {
			skipping = isTableOf(m[1], key, name)
			if skipping && !inserted {
				out = append(out, table)
				inserted = true
			}
		}
		if !skipping {
			out = append(out, line)
		} else if t := strings.TrimSpace(line); (t == "" || strings.HasPrefix(t, "#")) && !tomlHeader().MatchString(line) {
			// A blank line or comment ending the old table may head the
			// next one: kept, and dropped only if the table goes on.
			out = append(out, line)
		}
	}
	if _, exists := servers[name]; exists && !inserted {
		return nil, fmt.Errorf("defines %s.%s other than as a [%s.%s] table; edit it by hand", key, name, key, name)
	}
	if !inserted {
		text := strings.Join(out, "")
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if text != "" {
			text += "\n"
		}
		return []byte(text + table), nil
	}
	return []byte(strings.Join(out, "")), nil
}

// isTableOf reports whether a header's dotted name is key.name or one of
// its sub-tables, quoted or not.
func isTableOf(header, key, name string) bool {
	parts := strings.Split(header, ".")
	if len(parts) < 2 {
		return false
	}
	unq := func(s string) string {
		s = strings.TrimSpace(s)
		if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
			return s[1 : len(s)-1]
		}
		return s
	}
	return unq(parts[0]) == key && unq(parts[1]) == name
}

// tomlTable renders [key.name] with the entry's keys: strings, string
// arrays and string tables (inline), in a fixed order.
func tomlTable(key, name string, entry map[string]any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s.%s]\n", key, name)
	order := []string{"command", "args", "url"}
	for _, k := range slices.Sorted(maps.Keys(entry)) {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	for _, k := range order {
		v, ok := entry[k]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "%s = %s\n", k, tomlValue(v))
	}
	return b.String()
}

// tomlValue writes a string, []string or map[string]string; a JSON
// string is a valid TOML basic string.
func tomlValue(v any) string {
	str := func(s string) string {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.TrimSuffix(b.String(), "\n")
	}
	switch v := v.(type) {
	case string:
		return str(v)
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = str(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case map[string]string:
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			kv = append(kv, str(k)+" = "+str(v[k]))
		}
		return "{ " + strings.Join(kv, ", ") + " }"
	}
	return str(fmt.Sprint(v)) // not built by install; checkMerged refuses the result
}
