package builtin

import (
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

const editSource = "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"

func TestFSEditExpectedReplacements(t *testing.T) { eachEnv(t, testFSEditExpectedReplacements) }

func testFSEditExpectedReplacements(t *testing.T, f *fixture) {
	tests := []struct {
		name string
		args map[string]any
		want string
		n    int
	}{
		{"all of them, counted", map[string]any{"old": "return 1", "new": "return 2", "expected_replacements": 2},
			"func a() {\n\treturn 2\n}\n\nfunc b() {\n\treturn 2\n}\n", 2},
		{"unique with context", map[string]any{"old": "func b() {\n\treturn 1", "new": "func b() {\n\treturn 3", "expected_replacements": 1},
			"func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 3\n}\n", 1},
		{"unique from line start", map[string]any{"old": "return 1", "new": "return 4", "start": 4, "expected_replacements": 1},
			"func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 4\n}\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.write("e.go", editSource)
			tt.args["path"] = "e.go"
			res := f.call("fs.edit", tt.args)
			if res.Err != nil {
				t.Fatalf("fs.edit(%v): %v", tt.args, res.Err)
			}
			if got := res.Value.(FSEditResult).Replacements; got != tt.n {
				t.Errorf("replacements = %d; want %d", got, tt.n)
			}
			if diff := cmp.Diff(tt.want, f.read("e.go")); diff != "" {
				t.Errorf("file after fs.edit(%v) (-want +got):\n%s", tt.args, diff)
			}
		})
	}

	p := f.write("e.go", editSource)
	f.write("many.txt", strings.Repeat("x\n", 7))
	pm := f.ws + "/many.txt"
	failures := []struct {
		name    string
		args    map[string]any
		kind    registry.Kind
		message string // the whole message, or with contains its start
		prefix  bool
	}{
		{"too many", map[string]any{"path": "e.go", "old": "return 1", "new": "r", "expected_replacements": 1}, registry.KindTool,
			"expected 1 occurrence of old in " + p + " from line 0, found 2: at lines 2, 6 (1-based); include more of the surrounding text in old so that it occurs once, or set expected_replacements=2 to replace all 2. The file was not changed.", false},
		{"too few", map[string]any{"path": "e.go", "old": "return 1", "new": "r", "expected_replacements": 3}, registry.KindTool,
			"expected 3 occurrences of old in " + p + " from line 0, found 2: at lines 2, 6 (1-based); set expected_replacements=2 to replace all 2, or change old. The file was not changed.", false},
		{"first few listed", map[string]any{"path": "many.txt", "old": "x", "new": "y", "start": 1, "expected_replacements": 1}, registry.KindTool,
			"expected 1 occurrence of old in " + pm + " from line 1, found 6: at lines 2, 3, 4, 5, 6 and 1 more (1-based); include more of the surrounding text in old so that it occurs once, or set expected_replacements=6 to replace all 6. The file was not changed.", false},
		{"whitespace differs", map[string]any{"path": "e.go", "old": "func a() {\n    return 1\n}", "new": "r", "expected_replacements": 1}, registry.KindTool,
			"'func a() {\n    return 1\n}' not found in " + p + " from line 0 (expected_replacements=1)\n" +
				"old matches lines 1-3 of the file (1-based) except for whitespace (indentation, spaces or line endings); copy the exact text (fs.read offset=0 limit=3):\n" +
				"--- old\n+++ " + p + "\n@@ -1,3 +1,3 @@\n func a() {\n-    return 1\n+\treturn 1\n }", false},
		{"near miss", map[string]any{"path": "e.go", "old": "func b() {\n\treturn 2\n}\n", "new": "r", "expected_replacements": 1}, registry.KindTool,
			"'func b() {\n\treturn 2\n}\n' not found in " + p + " from line 0 (expected_replacements=1)\n" +
				"closest text: lines 5-7 of the file (1-based), 90% similar; diff from old to the file:\n" +
				"--- old\n+++ " + p + "\n@@ -1,3 +5,3 @@\n func b() {\n-\treturn 2\n+\treturn 1\n }", false},
		{"one-line near miss", map[string]any{"path": "e.go", "old": "return 7", "new": "r", "start": 5, "expected_replacements": 1}, registry.KindTool,
			"'return 7' not found in " + p + " from line 5 (expected_replacements=1)\nclosest text: line 6 of the file (1-based), 86% similar; diff from old to the file:\n" +
				"--- old\n+++ " + p + "\n@@ -1,1 +6,1 @@\n-return 7\n+\treturn 1", false},
		{"nothing close", map[string]any{"path": "e.go", "old": "SELECT * FROM users;", "new": "r", "expected_replacements": 1}, registry.KindTool,
			"'SELECT * FROM users;' not found in " + p + " from line 0 (expected_replacements=1)\n(nothing in the file is close to old; check it with fs.read)", false},
		{"start past the end", map[string]any{"path": "e.go", "old": "zz", "new": "r", "start": 50, "expected_replacements": 1}, registry.KindTool,
			"'zz' not found in " + p + " from line 50 (expected_replacements=1)\n(the file has only 7 lines, so there is nothing from line 50 on)", false},
		{"zero refused", map[string]any{"path": "e.go", "old": "return 1", "new": "r", "expected_replacements": 0}, registry.KindInvalidInput,
			"Tool 'fs_edit' argument validation failed.", true},
		{"without it, Bub's message", map[string]any{"path": "e.go", "old": "return 2", "new": "r"}, registry.KindTool,
			"'return 2' not found in " + p + " from line 0", false},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			e := f.fails("fs.edit", tt.args)
			got := e.Message
			if tt.prefix && strings.HasPrefix(got, tt.message) {
				got = tt.message
			}
			if e.Kind != tt.kind || got != tt.message {
				t.Errorf("fs.edit(%v) = [%s]; want [%s]; message (-want +got):\n%s", tt.args, e.Kind, tt.kind, cmp.Diff(tt.message, e.Message))
			}
		})
	}
	if got := f.read("e.go"); got != editSource {
		t.Errorf("a refused edit changed the file: %q", got)
	}
}

func TestNearMissBounds(t *testing.T) {
	big := strings.Repeat("line\n", nearMissMaxOld+1)
	if got := nearMiss("a\n", 0, big, "f"); !strings.Contains(got, "too many to look for a near miss") {
		t.Errorf("nearMiss with %d lines of old = %q; want it refused", nearMissMaxOld+1, got)
	}
	// A diff longer than diffMaxLines is cut, and so are wide lines.
	var old, file []string
	for i := range 60 {
		old = append(old, strings.Repeat("o", 300)+string(rune('a'+i%26)))
		file = append(file, strings.Repeat("o", 300)+string(rune('A'+i%26)))
	}
	got := nearMiss(strings.Join(file, "\n"), 0, strings.Join(old, "\n"), "f")
	lines := strings.Split(got, "\n")
	if n := len(lines); n > diffMaxLines+6 {
		t.Errorf("near-miss diff has %d lines; want at most %d", n, diffMaxLines+6)
	}
	if !strings.Contains(got, "more diff lines)") {
		t.Errorf("a cut diff does not say so:\n%s", got)
	}
	for _, l := range lines {
		if len([]rune(l)) > diffMaxWidth+2 {
			t.Errorf("diff line of %d characters; want at most %d", len([]rune(l)), diffMaxWidth+2)
		}
	}
}

func TestDiffLines(t *testing.T) {
	tests := []struct {
		a, b []string
		want []string
	}{
		{nil, nil, nil},
		{[]string{"a"}, []string{"a"}, []string{" a"}},
		{[]string{"a", "b", "c"}, []string{"a", "x", "c"}, []string{" a", "-b", "+x", " c"}},
		{[]string{"a"}, []string{"a", "b"}, []string{" a", "+b"}},
		{[]string{"a", "b"}, []string{"b"}, []string{"-a", " b"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, diffLines(tt.a, tt.b)); diff != "" {
			t.Errorf("diffLines(%q, %q) (-want +got):\n%s", tt.a, tt.b, diff)
		}
	}
}
