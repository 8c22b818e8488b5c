package registry

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

type echoIn struct {
	Message string `json:"message" jsonschema:"description=Text to echo back,minLength=1"`
}

type orderIn struct {
	OrderID string   `json:"order_id" jsonschema:"description=Complete order ID,pattern=^[A-Z][0-9]+$"`
	Amount  float64  `json:"amount" jsonschema:"exclusiveMinimum=0"`
	Mode    string   `json:"mode,omitempty" jsonschema:"enum=fast,enum=slow,default=fast"`
	Count   int      `json:"count,omitempty" jsonschema:"minimum=1,maximum=10,default=1"`
	Tags    []string `json:"tags,omitempty" jsonschema:"maxItems=3"`
	Verbose bool     `json:"verbose,omitempty"`
	Note    *string  `json:"note,omitempty"`
	Item    item     `json:"item,omitzero"`
}

type item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty,omitempty"`
}

type orderOut struct {
	ID     string            `json:"id"`
	Status string            `json:"status"`
	Extra  map[string]string `json:"extra,omitempty"`
}

type node struct {
	Name     string  `json:"name"`
	Children []*node `json:"children"`
}

type nodeIn struct {
	Root node `json:"root"`
}

func echoTool(t testing.TB, opts ...Option) *Tool {
	t.Helper()
	tool, err := NewTool("test.echo", "Echo a message.", func(ctx context.Context, tc *ToolContext, in echoIn) (string, error) {
		return "Echo: " + in.Message, nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func orderTool(t testing.TB) *Tool {
	t.Helper()
	tool, err := NewTool("orders.get", "Look up an order.", func(ctx context.Context, tc *ToolContext, in orderIn) (orderOut, error) {
		return orderOut{ID: in.OrderID, Status: in.Mode + "/" + strings.Repeat("x", in.Count)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestReflectedSchemasGolden(t *testing.T) {
	tests := []struct {
		name string
		tool *Tool
	}{
		{"echo", echoTool(t)},
		{"order", orderTool(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]json.RawMessage{"input": tt.tool.InputSchema, "output": tt.tool.OutputSchema}
			b, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.name+".schema.golden.json")
			if *update {
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantBytes, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			var want, have any
			if err := json.Unmarshal(wantBytes, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &have); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, have); diff != "" {
				t.Errorf("schema mismatch (-want +got):\n%s", diff)
			}
			s := string(tt.tool.InputSchema)
			for _, bad := range []string{"$ref", "$defs", "$schema", "$id"} {
				if strings.Contains(s, bad) {
					t.Errorf("input schema contains %s: %s", bad, s)
				}
			}
		})
	}
}

func TestNewToolRejectsBadTypes(t *testing.T) {
	noop := func(ctx context.Context, tc *ToolContext, in nodeIn) (string, error) { return "", nil }
	if _, err := NewTool("tree", "", noop); err == nil || !strings.Contains(err.Error(), "recursive type") {
		t.Errorf("recursive input: err = %v; want recursive type error", err)
	}
	if _, err := NewTool("scalar", "", func(ctx context.Context, tc *ToolContext, in string) (string, error) { return in, nil }); err == nil {
		t.Error("non-struct input accepted")
	}
	if _, err := NewTool("fn", "", func(ctx context.Context, tc *ToolContext, in struct{ F func() }) (string, error) { return "", nil }); err == nil {
		t.Error("func field accepted")
	}
	if _, err := NewTool[echoIn, string]("nil", "", nil); err == nil {
		t.Error("nil handler accepted")
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		name    string
		model   string
		wantErr bool
	}{
		{"fs.read", "fs_read", false},
		{"mcp.search-docs", "mcp_search-docs", false},
		{"a", "a", false},
		{"", "", true},
		{"has space", "has space", true},
		{"ünïcode", "ünïcode", true},
		{strings.Repeat("x", 65), strings.Repeat("x", 65), true},
		{strings.Repeat("x", 64), strings.Repeat("x", 64), false},
	}
	for _, tt := range tests {
		if got := ModelName(tt.name); got != tt.model {
			t.Errorf("ModelName(%q) = %q; want %q", tt.name, got, tt.model)
		}
		_, err := NewRawTool(tt.name, "", nil, func(context.Context, *ToolContext, json.RawMessage) (any, error) { return nil, nil })
		if (err != nil) != tt.wantErr {
			t.Errorf("NewRawTool(%q) err = %v; wantErr %v", tt.name, err, tt.wantErr)
		}
	}
}

func TestRegisterAndLookup(t *testing.T) {
	r := New()
	r.MustRegister(orderTool(t))
	r.MustRegister(echoTool(t))
	for _, name := range []string{"orders.get", "orders_get", "ORDERS.GET", "  Orders_Get ", "orders . get"} {
		tool, err := r.Lookup(name)
		if err != nil || tool.Name != "orders.get" {
			t.Errorf("Lookup(%q) = %v, %v; want orders.get", name, tool, err)
		}
	}
	_, err := r.Lookup("order.get")
	want := "[not_found] unknown tool name(s): 'order.get' (did you mean 'orders.get'?)"
	if err == nil || err.Error() != want {
		t.Errorf("Lookup(order.get) err = %v; want %q", err, want)
	}
	_, err = r.Lookup("zzz")
	if err == nil || err.Error() != "[not_found] unknown tool name(s): 'zzz'" {
		t.Errorf("Lookup(zzz) err = %v", err)
	}
	if diff := cmp.Diff([]string{"orders.get", "test.echo"}, r.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
}

func TestRegisterTwice(t *testing.T) {
	r := New()
	r.MustRegister(echoTool(t))
	err := r.Register(echoTool(t))
	if err == nil || !strings.Contains(err.Error(), "registered twice") || strings.Count(err.Error(), "registry_test.go:") != 2 {
		t.Errorf("second Register err = %v; want both call sites", err)
	}
	// The model form clashes too: test_echo would shadow test.echo.
	clash, _ := NewRawTool("test_echo", "", nil, func(context.Context, *ToolContext, json.RawMessage) (any, error) { return nil, nil })
	if err := r.Register(clash); err == nil {
		t.Error("model-name clash accepted")
	}
	defer func() {
		if recover() == nil {
			t.Error("MustRegister of a duplicate did not panic")
		}
	}()
	r.MustRegister(echoTool(t))
}

func TestErrorForms(t *testing.T) {
	e := &Error{Kind: KindTool, Message: "Tool 'x' execution failed.", Details: map[string]any{"error": "<boom> & co"}}
	if got, want := e.String(), "[tool] Tool 'x' execution failed."; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
	if got, want := e.JSON(), `{"kind":"tool","message":"Tool 'x' execution failed.","details":{"error":"<boom> & co"}}`; got != want {
		t.Errorf("JSON() = %s; want %s", got, want)
	}
	if got, want := (&Error{Kind: KindConfig, Message: "m"}).JSON(), `{"kind":"config","message":"m"}`; got != want {
		t.Errorf("JSON() without details = %s; want %s", got, want)
	}
}

// TestSchemaCompiledOnFirstCall checks the lazy validator: a schema whose
// root is wrong is refused at construction, one that only the full
// compiler rejects fails the call (as a config error naming the tool),
// and a good one validates from its first call on.
func TestSchemaCompiledOnFirstCall(t *testing.T) {
	h := func(context.Context, *ToolContext, json.RawMessage) (any, error) { return "ok", nil }
	if _, err := NewRawTool("bad.root", "", json.RawMessage(`{"type":"string"}`), h); err == nil || !strings.Contains(err.Error(), `input schema root must have "type": "object"`) {
		t.Errorf("NewRawTool with a string root = %v", err)
	}
	if _, err := NewRawTool("bad.json", "", json.RawMessage(`{"type":`), h); err == nil || !strings.Contains(err.Error(), "input schema is not a JSON object") {
		t.Errorf("NewRawTool with broken JSON = %v", err)
	}
	bad, err := NewRawTool("bad.pattern", "", json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`), h)
	if err != nil {
		t.Fatalf("NewRawTool refused a schema only the compiler can judge: %v", err)
	}
	good, err := NewRawTool("good", "", json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`), h)
	if err != nil {
		t.Fatal(err)
	}
	// A reference outside the schema is not followed: here a file that
	// would make "a" a string, and file:///dev/stdin.
	schemaFile := filepath.Join(t.TempDir(), "a.json")
	if err := os.WriteFile(schemaFile, []byte(`{"type":"string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fileRef, err := NewRawTool("file.ref", "", json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"file://`+filepath.ToSlash(schemaFile)+`"}}}`), h)
	if err != nil {
		t.Fatal(err)
	}
	stdinRef, err := NewRawTool("stdin.ref", "", json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"file:///dev/stdin"}}}`), h)
	if err != nil {
		t.Fatal(err)
	}
	reg := New()
	reg.MustRegister(bad)
	reg.MustRegister(good)
	reg.MustRegister(fileRef)
	reg.MustRegister(stdinRef)
	e := NewExecutor(reg, nil)
	tests := []struct {
		tool, args string
		wantKind   Kind
		wantMsg    string
	}{
		{"bad.pattern", `{"a":"x"}`, KindConfig, "Tool 'bad.pattern' has an input schema that cannot be compiled"},
		{"good", `{}`, KindInvalidInput, "Tool 'good' argument validation failed."},
		{"good", `{"n":1}`, "", ""},
		{"file.ref", `{"a":1}`, KindConfig, "Tool 'file.ref' has an input schema that cannot be compiled"},
		{"stdin.ref", `{"a":1}`, KindConfig, "Tool 'stdin.ref' has an input schema that cannot be compiled"},
	}
	for _, tt := range tests {
		res := e.Call(context.Background(), Call{Tool: tt.tool, Args: json.RawMessage(tt.args)})
		switch {
		case tt.wantKind == "" && res.Err != nil:
			t.Errorf("%s(%s) = %v; want success", tt.tool, tt.args, res.Err)
		case tt.wantKind != "" && (res.Err == nil || res.Err.Kind != tt.wantKind || !strings.HasPrefix(res.Err.Message, tt.wantMsg)):
			t.Errorf("%s(%s) = %v; want [%s] %s...", tt.tool, tt.args, res.Err, tt.wantKind, tt.wantMsg)
		}
	}
}
