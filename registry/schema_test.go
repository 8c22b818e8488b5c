package registry

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// seededArgs' schema comes from the seed below, which says something
// reflection never would, so a test can tell the two apart.
type seededArgs struct {
	A string `json:"a"`
}

const seededSchema = `{"type":"object","properties":{"from_seed":{"type":"string"}}}`

func init() {
	// As a build's seeding package does: in init, before any tool is built.
	if err := SeedSchemas([]byte(`{"github.com/bubbuild/bub-mcp/registry.seededArgs":` + seededSchema + `}`)); err != nil {
		panic(err)
	}
}

func TestSeedSchemas(t *testing.T) {
	got, err := ReflectSchema(reflect.TypeFor[seededArgs]())
	if err != nil || string(got) != seededSchema {
		t.Errorf("ReflectSchema(seeded type) = %s, %v; want the seed %s", got, err, seededSchema)
	}
	tool, err := NewTool("seeded", "", func(_ context.Context, _ *ToolContext, in seededArgs) (string, error) { return in.A, nil })
	if err != nil || string(tool.InputSchema) != seededSchema {
		t.Errorf("NewTool(seeded type).InputSchema = %s, %v; want the seed", tool.InputSchema, err)
	}
	if _, ok := ReflectedSchemas()[TypeKey(reflect.TypeFor[seededArgs]())]; ok {
		t.Error("ReflectedSchemas lists a seeded type: it was not reflected")
	}

	// An unseeded type is reflected once and listed.
	type fresh struct {
		B int `json:"b"`
	}
	first, err := ReflectSchema(reflect.TypeFor[fresh]())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"properties":{"b":{"type":"integer"}},"additionalProperties":false,"type":"object","required":["b"]}`; string(first) != want {
		t.Errorf("ReflectSchema(fresh) = %s; want %s", first, want)
	}
	again, _ := ReflectSchema(reflect.TypeFor[fresh]())
	if &again[0] != &first[0] {
		t.Error("a type's schema was reflected twice")
	}
	if diff := cmp.Diff(string(first), string(ReflectedSchemas()[TypeKey(reflect.TypeFor[fresh]())])); diff != "" {
		t.Errorf("ReflectedSchemas entry (-want +got):\n%s", diff)
	}

	for _, bad := range []string{"{", "[]", `{"k": }`} {
		if err := SeedSchemas([]byte(bad)); err == nil {
			t.Errorf("SeedSchemas(%q) = nil; want an error", bad)
		}
	}
}

type keyNamed struct{}

type keyGeneric[T any] struct{ V T }

func TestTypeKey(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[keyNamed](), "github.com/bubbuild/bub-mcp/registry.keyNamed"},
		{reflect.TypeFor[string](), "string"},
		{reflect.TypeFor[*keyNamed](), "*github.com/bubbuild/bub-mcp/registry.keyNamed"},
		{reflect.TypeFor[[]keyNamed](), "[]github.com/bubbuild/bub-mcp/registry.keyNamed"},
		{reflect.TypeFor[[3]int](), "[3]int"},
		{reflect.TypeFor[map[string]*keyNamed](), "map[string]*github.com/bubbuild/bub-mcp/registry.keyNamed"},
		{reflect.TypeFor[any](), "interface {}"},
		{
			reflect.TypeFor[struct {
				A    string `json:"a"`
				b    int
				Next []keyNamed
				keyNamed
			}](),
			`struct { A string "json:\"a\""; github.com/bubbuild/bub-mcp/registry.b int; Next []github.com/bubbuild/bub-mcp/registry.keyNamed; github.com/bubbuild/bub-mcp/registry.keyNamed }`,
		},
	}
	for _, tt := range tests {
		if got := TypeKey(tt.typ); got != tt.want {
			t.Errorf("TypeKey(%v) = %q; want %q", tt.typ, got, tt.want)
		}
	}
	// Two instantiations of one generic type are two types.
	if a, b := TypeKey(reflect.TypeFor[keyGeneric[int]]()), TypeKey(reflect.TypeFor[keyGeneric[string]]()); a == b {
		t.Errorf("TypeKey of keyGeneric[int] and keyGeneric[string] are both %q", a)
	}
}

// The seeds file is read line by line, without decoding its schemas; what
// that gives must be what decoding the whole file gives, and anything not
// in the generator's form falls back to decoding.
func TestSeedLines(t *testing.T) {
	real, err := os.ReadFile("../internal/schemaseed/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		data  string
		lines bool // read by seedLines, not the fallback
	}{
		{"schemaseed's file", string(real), true},
		{"escaped quotes in a key", "{\n\"struct { P string \\\"json:\\\\\\\"p\\\\\\\"\\\": x\\\" }\": {\"type\":\"object\"},\n\"b\": {\"type\":\"string\"}\n}\n", true},
		{"one line", `{"a": {"type":"object"}}`, false},
		{"not an object value", "{\n\"a\": 1\n}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.data), &want); err != nil {
				t.Fatal(err)
			}
			got, ok := seedLines([]byte(tc.data))
			if ok != tc.lines {
				t.Fatalf("seedLines ok = %v; want %v", ok, tc.lines)
			}
			if !ok {
				return
			}
			if len(got) < 2 {
				t.Fatalf("got %d seeds", len(got))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("seedLines differs from json.Unmarshal (-want +got):\n%s", diff)
			}
		})
	}
}
