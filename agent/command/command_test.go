package command

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		line string
		want *Command
		err  string
	}{
		{line: "fs.read path=README.md", want: &Command{Raw: "fs.read path=README.md", Name: "fs.read", Keywords: []Keyword{{"path", "README.md"}}}},
		{line: "  fs.read README.md 10  ", want: &Command{Raw: "fs.read README.md 10", Name: "fs.read", Positional: []string{"README.md", "10"}}},
		{line: `fs.write path='my notes.txt' content="a \"b\" c"`, want: &Command{Raw: `fs.write path='my notes.txt' content="a \"b\" c"`, Name: "fs.write",
			Keywords: []Keyword{{"path", "my notes.txt"}, {"content", `a "b" c`}}}},
		{line: "x a b=c=d", want: &Command{Raw: "x a b=c=d", Name: "x", Positional: []string{"a"}, Keywords: []Keyword{{"b", "c=d"}}}},
		{line: "x =v", want: &Command{Raw: "x =v", Name: "x", Positional: []string{"=v"}}},
		{line: `x a\ b 'it''s' ""`, want: &Command{Raw: `x a\ b 'it''s' ""`, Name: "x", Positional: []string{"a b", "its", ""}}},
		{line: "code_mode enable=true", want: &Command{Raw: "code_mode enable=true", Name: "code_mode", Keywords: []Keyword{{"enable", "true"}}}},
		{line: "fs.read path=a extra", err: "positional argument 'extra' cannot appear after keyword arguments"},
		{line: "", err: "empty command"},
		{line: "   \t", err: "empty command"},
		{line: `bash "unterminated`, err: "no closing quotation"},
		{line: `bash 'unterminated`, err: "no closing quotation"},
		{line: `bash trailing\`, err: "no escaped character after the final backslash"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, err := Parse(tt.line)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("Parse(%q) error = %v; want %q", tt.line, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.line, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
	if _, err := Parse(""); !errors.Is(err, ErrEmpty) {
		t.Errorf("Parse(\"\") = %v; want ErrEmpty", err)
	}
}

func TestStrip(t *testing.T) {
	tests := []struct {
		text, prefix, want string
		ok                 bool
	}{
		{"  ,help ", "", "help", true},
		{",", ",", "", true},
		{"hello, world", "", "", false},
		{"/bub tools", "/bub", "tools", true},
	}
	for _, tt := range tests {
		got, ok := Strip(tt.text, tt.prefix)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Strip(%q, %q) = %q, %v; want %q, %v", tt.text, tt.prefix, got, ok, tt.want, tt.ok)
		}
	}
}

func TestArguments(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}}}`)
	tests := []struct {
		line, want, err string
	}{
		{line: "fs.read README.md 2 limit=3", want: `{"limit":"3","offset":"2","path":"README.md"}`},
		{line: "fs.read path=x", want: `{"path":"x"}`},
		{line: "fs.read", want: `{}`},
		{line: "fs.read a b c d", err: "fs.read takes at most 3 positional arguments (path, offset, limit), got 4"},
		{line: "fs.read a path=b", err: "fs.read got multiple values for argument 'path'"},
	}
	for _, tt := range tests {
		c, err := Parse(tt.line)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Arguments(schema)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("Arguments(%q) error = %v; want %q", tt.line, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("Arguments(%q) = %s, %v; want %s", tt.line, got, err, tt.want)
		}
	}
}

func TestPropertyNamesKeepsOrder(t *testing.T) {
	got := PropertyNames(json.RawMessage(`{"properties":{"z":{},"a":{"properties":{"inner":{}}},"m":{}}}`))
	if diff := cmp.Diff([]string{"z", "a", "m"}, got); diff != "" {
		t.Errorf("PropertyNames (-want +got):\n%s", diff)
	}
	if got := PropertyNames(json.RawMessage(`not json`)); got != nil {
		t.Errorf("PropertyNames(bad) = %v; want nil", got)
	}
}

// FuzzParse checks that no line makes the parser panic, and that what it
// accepts is consistent: a name, and keywords with non-empty keys.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"fs.read path=README.md", `a 'b c' "d\"e" f\ g`, "x a=1 b", "", `"`, `\`, "a =b", "a\tb\nc", "'", `"\$\x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := Parse(line)
		if err != nil {
			return
		}
		if c.Name == "" {
			t.Fatalf("Parse(%q): accepted with an empty name", line)
		}
		for _, k := range c.Keywords {
			if k.Key == "" {
				t.Fatalf("Parse(%q): empty keyword key", line)
			}
		}
		if args, err := c.Arguments(json.RawMessage(`{"type":"object","properties":{"a":{},"b":{}}}`)); err == nil && !json.Valid(args) {
			t.Fatalf("Arguments(%q) = %s: invalid JSON", line, args)
		}
	})
}
