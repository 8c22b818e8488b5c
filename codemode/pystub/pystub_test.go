package pystub_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/codemode/pystub"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// stubCase is one tool in a testdata/*.json file.
type stubCase struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

func loadTools(tb testing.TB, path string) []pystub.Tool {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var cases []stubCase
	if err := json.Unmarshal(data, &cases); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	tools := make([]pystub.Tool, len(cases))
	for i, c := range cases {
		tools[i] = pystub.Tool(c)
	}
	return tools
}

func goldenInputs(tb testing.TB) []string {
	tb.Helper()
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(inputs) == 0 {
		tb.Fatalf("no golden inputs: %v", err)
	}
	return inputs
}

// pyCompile checks that every stub compiles with python3 -m py_compile.
func pyCompile(t *testing.T, stubs map[string]string) {
	t.Helper()
	if len(stubs) == 0 {
		t.Skip("no stubs to compile")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	dir := t.TempDir()
	var files []string
	for _, name := range slices.Sorted(maps.Keys(stubs)) {
		path := filepath.Join(dir, name+".py")
		if err := os.WriteFile(path, []byte(stubs[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	cmd := exec.Command(python, append([]string{"-m", "py_compile"}, files...)...)
	cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+filepath.Join(dir, "pycache"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("python3 -m py_compile: %v\n%s", err, out)
	}
}

func TestGenerateGolden(t *testing.T) {
	stubs := map[string]string{}
	for _, input := range goldenInputs(t) {
		name := strings.TrimSuffix(filepath.Base(input), ".json")
		t.Run(name, func(t *testing.T) {
			got, err := pystub.Generate(loadTools(t, input))
			if err != nil {
				t.Fatalf("Generate(%s) error: %v", input, err)
			}
			stubs[name] = got
			golden := strings.TrimSuffix(input, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Generate(%s) mismatch (-want +got):\n%s", input, diff)
			}
		})
	}
	t.Run("py_compile", func(t *testing.T) { pyCompile(t, stubs) })
}

func TestGenerateSpecLines(t *testing.T) {
	tools := []pystub.Tool{
		{
			Name:         "orders_get",
			Description:  "Look up an order by id.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"include_items":{"type":"boolean","default":false}},"required":["order_id"]}`),
			OutputSchema: json.RawMessage(`{"anyOf":[{"title":"Order","description":"An order record.","type":"object","properties":{"id":{"type":"string"},"total":{"type":"number"}},"required":["id","total"]},{"title":"Missing","type":"object","properties":{"error":{"type":"string"}},"required":["error"]}]}`),
		},
		{
			Name:        "mcp_search-docs",
			Description: "Search docs.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"max-results":{"type":"integer"}},"required":["query"]}`),
		},
	}
	got, err := pystub.Generate(tools)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"function with a union result", "async def orders_get(*, order_id: str, include_items: bool = False) -> Order | Missing:\n" +
			`    """Look up an order by id."""`},
		{"class with a docstring", "class Order(TypedDict):\n    \"\"\"An order record.\"\"\"\n    id: str\n    total: float"},
		{"class without a docstring", "class Missing(TypedDict):\n    error: str"},
		{"non-identifier parameter via kwargs", "async def mcp_search_docs(*, query: str, **kwargs: Any) -> Any:"},
		{"typing import", "\nfrom typing import Any, Literal, NotRequired, TypedDict\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(got, tc.want) {
				t.Errorf("Generate() lacks %q; got:\n%s", tc.want, got)
			}
		})
	}
}

func TestGenerateIgnoresToolOrder(t *testing.T) {
	var tools []pystub.Tool
	for _, input := range []string{"collisions", "refs", "keywords", "orders_get"} {
		tools = append(tools, loadTools(t, filepath.Join("testdata", input+".json"))...)
	}
	want, err := pystub.Generate(tools)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		r.Shuffle(len(tools), func(i, j int) { tools[i], tools[j] = tools[j], tools[i] })
		got, err := pystub.Generate(tools)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Generate(shuffled) mismatch (-want +got):\n%s", diff)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools []pystub.Tool
		want  string
	}{
		{
			name:  "bad input JSON",
			tools: []pystub.Tool{{Name: "a", InputSchema: json.RawMessage(`{"type":`)}},
			want:  `tool "a": input schema: unexpected EOF`,
		},
		{
			name:  "bad output JSON",
			tools: []pystub.Tool{{Name: "a", OutputSchema: json.RawMessage(`{} []`)}},
			want:  `tool "a": output schema: unexpected [ after the schema`,
		},
		{
			name:  "same identifier",
			tools: []pystub.Tool{{Name: "mcp_search-docs"}, {Name: "mcp.search_docs"}},
			want:  `tools "mcp.search_docs" and "mcp_search-docs" both map to mcp_search_docs`,
		},
		{
			name:  "duplicate",
			tools: []pystub.Tool{{Name: "a"}, {Name: "a"}},
			want:  `duplicate tool "a"`,
		},
		{
			name:  "too deep",
			tools: []pystub.Tool{{Name: "x", InputSchema: json.RawMessage(strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000))}},
			want:  `tool "x": input schema: schema is nested too deeply`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pystub.Generate(tc.tools)
			if err == nil {
				t.Fatalf("Generate() succeeded; want error %s", tc.want)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("Generate() error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenerateDeepSchemas(t *testing.T) {
	deep := strings.Repeat(`{"type":"array","items":`, 200) + `{"type":"string"}` + strings.Repeat(`}`, 200)
	got, err := pystub.Generate([]pystub.Tool{
		{Name: "deep", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":` + deep + `}}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(got, "list["); n > 40 {
		t.Errorf("Generate(deep) nests list %d times; want the depth capped", n)
	}
	pyCompile(t, map[string]string{"deep": got})
}

func TestIdentifier(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"orders_get", "orders_get"},
		{"mcp_search-docs", "mcp_search_docs"},
		{"fs.read", "fs_read"},
		{"2fa", "_2fa"},
		{"class", "_class"},
		{"None", "_None"},
		{"match", "_match"},
		{"type", "_type"},
		{"_", "__"},
		{"", "_"},
		{"café", "caf_"},
		{"a b\tc", "a_b_c"},
		{"\xff", "__"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, pystub.Identifier(tc.in)); diff != "" {
				t.Errorf("Identifier(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// fuzzSeeds start FuzzGenerate, next to the golden inputs;
// TestFuzzSeedsCompile checks that each yields a stub Python accepts.
var fuzzSeeds = []struct{ name, desc, in, out string }{
	{"orders.get", "Look up an order.", `{"type":"object","properties":{"order_id":{"type":"string"},"include_items":{"type":"boolean","default":false}},"required":["order_id"]}`, `{"title":"Order","type":"object","properties":{"id":{"type":"string"}}}`},
	{"mcp_search-docs", `ends with "`, `{"type":"object","properties":{"max-results":{"type":"integer","default":1e400},"from":{"const":"x"},"kwargs":{"type":"string"}}}`, ``},
	{"class", `"""\"`, `{"type":"object","properties":{"a":{"$ref":"#"},"b":{"$ref":"#/$defs/x"}},"$defs":{"x":{"anyOf":[{"$ref":"#/$defs/x"}]}}}`, `null`},
	{"2", "\x00\r\n\u2028", `{"properties":{"":{"type":"object","properties":{"":{"enum":[null,1.5,"'\""]}}},"0":{"default":{"a":[{}]}}}}`, `{"type":["object","array"],"properties":{"x-y":{"type":"integer"}},"items":{"prefixItems":[]}}`},
	{"π.tool", "caf\u00e9", `{"type":"object","properties":{"名前":{"type":"string","description":"\u202e"}},"required":["名前"]}`, `{"$defs":{"A":{"type":"object","properties":{"b":{"$ref":"#/$defs/B"}}},"B":{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}}}},"$ref":"#/$defs/A"}`},
	{"deep", "", strings.Repeat(`{"type":"object","properties":{"x":`, 40) + `{}` + strings.Repeat(`}}`, 40), `[]`},
	{"big", "", `{"type":"object","properties":{"n":{"enum":[` + strings.Repeat("9", 4400) + `],"default":` + strings.Repeat("9", 4400) + `}}}`, `{"type":"object","properties":{"x":{"title":"None","type":"object","properties":{"True":{"type":"null"}}}}}`},
	{"", "", `true`, `"string"`},
}

func TestFuzzSeedsCompile(t *testing.T) {
	stubs := map[string]string{}
	for i, s := range fuzzSeeds {
		got, err := pystub.Generate(fuzzTools(s.name, s.desc, []byte(s.in), []byte(s.out)))
		if err != nil {
			t.Fatalf("seed %d: Generate() error: %v", i, err)
		}
		stubs[fmt.Sprintf("seed%d", i)] = got
	}
	pyCompile(t, stubs)
}

// fuzzTools makes two tools of one input, each schema used both ways, so
// that one schema is read both as arguments and as a result.
func fuzzTools(name, desc string, in, out []byte) []pystub.Tool {
	return []pystub.Tool{
		{Name: name, Description: desc, InputSchema: in, OutputSchema: out},
		{Name: name + "_2", Description: desc, InputSchema: out, OutputSchema: in},
	}
}

// pythonKeywords are Python's keyword.kwlist (3.12), written out here
// rather than taken from the package under test. Soft keywords are valid
// identifiers, so they are not listed.
var pythonKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true, "def": true,
	"del": true, "elif": true, "else": true, "except": true, "finally": true, "for": true,
	"from": true, "global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true,
	"return": true, "try": true, "while": true, "with": true, "yield": true,
}

var (
	asciiIdentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	funcRE       = regexp.MustCompile(`(?m)^async def ([^(]*)\(`)
	classRE      = regexp.MustCompile(`(?m)^(?:class ([^(]*)\(TypedDict\):|([^ \n]*) = TypedDict\()`)
)

func isPythonIdent(s string) bool { return asciiIdentRE.MatchString(s) && !pythonKeywords[s] }

func FuzzGenerate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.name, s.desc, []byte(s.in), []byte(s.out))
	}
	for _, input := range goldenInputs(f) {
		for _, t := range loadTools(f, input) {
			f.Add(t.Name, t.Description, []byte(t.InputSchema), []byte(t.OutputSchema))
		}
	}
	f.Fuzz(func(t *testing.T, name, desc string, in, out []byte) {
		tools := fuzzTools(name, desc, in, out)
		for _, tool := range tools {
			if ident := pystub.Identifier(tool.Name); !isPythonIdent(ident) {
				t.Fatalf("Identifier(%q) = %q; want a Python identifier", tool.Name, ident)
			}
		}
		got, err := pystub.Generate(tools)
		again, againErr := pystub.Generate([]pystub.Tool{tools[1], tools[0]})
		if err != nil {
			if againErr == nil || againErr.Error() != err.Error() {
				t.Fatalf("Generate() error = %v, then (tools reversed) %v; want the same error", err, againErr)
			}
			return
		}
		if againErr != nil || again != got {
			t.Fatalf("Generate() is not deterministic (err %v):\n%s", againErr, cmp.Diff(got, again))
		}
		if !utf8.ValidString(got) || strings.ContainsRune(got, 0) {
			t.Fatalf("Generate() = %q; want valid UTF-8 without NUL", got)
		}
		if !strings.HasPrefix(got, `"""Tools available inside `) || !strings.HasSuffix(got, "    ...\n") {
			t.Fatalf("Generate() = %q; want the module docstring first and a function body last", got)
		}

		// One function per tool, in name order, each under its identifier.
		slices.SortStableFunc(tools, func(a, b pystub.Tool) int { return strings.Compare(a.Name, b.Name) })
		var want, funcs []string
		for _, tool := range tools {
			want = append(want, pystub.Identifier(tool.Name))
		}
		for _, m := range funcRE.FindAllStringSubmatch(got, -1) {
			funcs = append(funcs, m[1])
		}
		if diff := cmp.Diff(want, funcs); diff != "" {
			t.Fatalf("Generate() functions mismatch (-want +got):\n%s\nstub:\n%s", diff, got)
		}

		// Every TypedDict has a distinct name no function uses.
		seen := map[string]bool{}
		for _, ident := range funcs {
			seen[ident] = true
		}
		for _, m := range classRE.FindAllStringSubmatch(got, -1) {
			class := m[1] + m[2]
			if !isPythonIdent(class) || seen[class] {
				t.Fatalf("Generate() declares TypedDict %q; want a fresh Python identifier\nstub:\n%s", class, got)
			}
			seen[class] = true
		}
	})
}

func BenchmarkGenerate(b *testing.B) {
	var tools []pystub.Tool
	for _, input := range []string{"pydantic_model", "refs", "nested_objects", "mcp_search_docs"} {
		tools = append(tools, loadTools(b, filepath.Join("testdata", input+".json"))...)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pystub.Generate(tools); err != nil {
			b.Fatal(err)
		}
	}
}
