// Package command parses Bub's comma commands: the lines a human types to
// run a tool directly, without the model (",fs.read path=README.md").
//
// A line is split the way POSIX shells and Python's shlex.split split
// words; the first word names the tool, words of the form key=value are
// keyword arguments (split at the first "="), and the other words are
// positional arguments, which must come first. Every value is a string;
// the executor's lax coercion turns "5" into 5 where the schema wants an
// integer, as Bub's pydantic validation does.
package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// DefaultPrefix starts a comma command (Bub's command_prefix).
const DefaultPrefix = ","

// ErrEmpty is returned for a line with no command in it.
var ErrEmpty = errors.New("empty command")

// Command is one parsed command line.
type Command struct {
	// Raw is the line as typed, without the prefix and surrounding space.
	Raw string
	// Name is the first word: the tool's runtime name.
	Name string
	// Positional are the words before the first keyword argument.
	Positional []string
	// Keywords are the key=value words, in the order typed.
	Keywords []Keyword
}

// Keyword is one key=value argument.
type Keyword struct {
	Key, Value string
}

// Strip reports whether text is a command (it starts with prefix once
// surrounding space is removed) and returns it without the prefix. An
// empty prefix means DefaultPrefix.
func Strip(text, prefix string) (string, bool) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, prefix) {
		return "", false
	}
	return strings.TrimSpace(t[len(prefix):]), true
}

// Parse splits a command line (without its prefix). It fails on bad
// quoting, an empty line (ErrEmpty) and a positional argument after a
// keyword argument.
func Parse(line string) (*Command, error) {
	words, err := Split(line)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, ErrEmpty
	}
	c, err := FromWords(words[0], words[1:])
	if err != nil {
		return nil, err
	}
	c.Raw = strings.TrimSpace(line)
	return c, nil
}

// FromWords builds a Command from words already split (by a shell, as
// `bub-mcp call` receives them).
func FromWords(name string, args []string) (*Command, error) {
	if name == "" {
		return nil, ErrEmpty
	}
	c := &Command{Name: name, Raw: strings.Join(append([]string{name}, args...), " ")}
	for _, w := range args {
		if k, v, ok := strings.Cut(w, "="); ok && k != "" {
			c.Keywords = append(c.Keywords, Keyword{k, v})
			continue
		}
		if len(c.Keywords) > 0 {
			return nil, fmt.Errorf("positional argument '%s' cannot appear after keyword arguments", w)
		}
		c.Positional = append(c.Positional, w)
	}
	return c, nil
}

// Arguments turns the command's arguments into the JSON object a call
// takes: keyword arguments by name, positional ones filling the schema's
// properties in the order they are written (the tool's parameter order).
// A later keyword overrides an earlier one of the same name.
func (c *Command) Arguments(inputSchema json.RawMessage) (json.RawMessage, error) {
	kw := make(map[string]any, len(c.Keywords)+len(c.Positional))
	for _, k := range c.Keywords {
		kw[k.Key] = k.Value
	}
	if len(c.Positional) > 0 {
		params := PropertyNames(inputSchema)
		if len(c.Positional) > len(params) {
			return nil, fmt.Errorf("%s takes at most %d positional arguments (%s), got %d", c.Name, len(params), strings.Join(params, ", "), len(c.Positional))
		}
		for i, v := range c.Positional {
			if _, dup := kw[params[i]]; dup {
				return nil, fmt.Errorf("%s got multiple values for argument '%s'", c.Name, params[i])
			}
			kw[params[i]] = v
		}
	}
	return json.Marshal(kw)
}

// PropertyNames lists a JSON schema's top-level properties in the order
// they are written.
func PropertyNames(schema json.RawMessage) []string {
	var root struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &root) != nil || len(root.Properties) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(root.Properties))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return names
		}
		name, _ := tok.(string)
		names = append(names, name)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return names
		}
	}
	return names
}

// Split splits a line into words the way POSIX shells (and Python's
// shlex.split) do: whitespace separates words, single quotes keep
// everything, double quotes keep everything but backslash escapes of
// \ " $ ` and newline, and a backslash outside quotes escapes the next
// character.
func Split(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			inWord = true
			if i+1 >= len(s) {
				return nil, errors.New("no escaped character after the final backslash")
			}
			i++
			cur.WriteByte(s[i])
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("no closing quotation")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if !closed {
				return nil, errors.New("no closing quotation")
			}
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
