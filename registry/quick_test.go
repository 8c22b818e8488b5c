package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// randSchema builds a schema from quickSchema's subset (and, now and then,
// a keyword outside it).
func randSchema(r *rand.Rand, depth int) map[string]any {
	s := map[string]any{}
	types := []string{"object", "array", "string", "integer", "number", "boolean", "null"}
	switch r.IntN(4) {
	case 0:
	case 1:
		s["type"] = types[r.IntN(len(types))]
	default:
		s["type"] = []any{types[r.IntN(len(types))], types[r.IntN(len(types))]}
	}
	if depth < 3 && r.IntN(2) == 0 {
		props := map[string]any{}
		for i := range r.IntN(4) {
			props[fmt.Sprint("p", i)] = randSchema(r, depth+1)
		}
		s["properties"] = props
		if r.IntN(2) == 0 {
			s["required"] = []any{"p0", fmt.Sprint("p", r.IntN(3))}
		}
		if r.IntN(2) == 0 {
			s["additionalProperties"] = r.IntN(2) == 0
		}
	}
	if depth < 3 && r.IntN(3) == 0 {
		s["items"] = randSchema(r, depth+1)
	}
	if r.IntN(4) == 0 {
		s["enum"] = []any{"a", 1.0, true, nil, 2.5}[:1+r.IntN(5)]
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if r.IntN(5) == 0 {
			s[k] = float64(r.IntN(7) - 3)
		}
	}
	for _, k := range []string{"minLength", "maxLength", "minItems", "maxItems"} {
		if r.IntN(5) == 0 {
			s[k] = float64(r.IntN(4))
		}
	}
	if r.IntN(6) == 0 {
		s["description"] = "d"
	}
	if r.IntN(15) == 0 {
		s["pattern"] = "^a" // outside the subset
	}
	return s
}

func randValue(r *rand.Rand, depth int) any {
	switch r.IntN(8) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return float64(r.IntN(9) - 4)
	case 3:
		return float64(r.IntN(9)-4) + 0.5
	case 4:
		return []string{"", "a", "ab", "é€", "abcd"}[r.IntN(5)]
	case 5:
		if depth > 3 {
			return "x"
		}
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randValue(r, depth+1)
		}
		return l
	default:
		if depth > 3 {
			return 1.0
		}
		m := map[string]any{}
		for i := range r.IntN(4) {
			m[fmt.Sprint("p", r.IntN(4)+i%2)] = randValue(r, depth+1)
		}
		return m
	}
}

// TestQuickNeverAcceptsInvalid checks the property quickSchema rests on:
// whatever it accepts, the general validator accepts too.
func TestQuickNeverAcceptsInvalid(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	quick, accepted := 0, 0
	for i := range 3000 {
		raw, _ := json.Marshal(randSchema(r, 0))
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		url := fmt.Sprintf("mem:///q%d.json", i)
		if err := c.AddResource(url, doc); err != nil {
			t.Fatal(err)
		}
		full, err := c.Compile(url)
		if err != nil {
			continue
		}
		q, ok := compileQuick(doc.(map[string]any))
		if !ok {
			continue
		}
		quick++
		for range 30 {
			b, _ := json.Marshal(randValue(r, 0))
			var v any
			json.Unmarshal(b, &v) // the form validation sees
			if q.valid(v) {
				accepted++
				if err := full.Validate(v); err != nil {
					t.Fatalf("quick accepted %s for schema %s; validator: %v", b, raw, err)
				}
			}
		}
	}
	if quick < 1000 || accepted < 1000 {
		t.Errorf("too few cases exercised: %d quick schemas, %d accepted values", quick, accepted)
	}
}

func TestQuickSubset(t *testing.T) {
	for _, tt := range []struct {
		schema string
		quick  bool
	}{
		{`{"type":"object","properties":{"a":{"type":"string","description":"x"}},"required":["a"],"additionalProperties":false}`, true},
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}}`, false},
		{`{"type":"object","$defs":{"x":{}},"properties":{"a":{"$ref":"#/$defs/x"}}}`, false},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, false},
		{`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}`, false},
	} {
		var m map[string]any
		json.Unmarshal([]byte(tt.schema), &m)
		if _, ok := compileQuick(m); ok != tt.quick {
			t.Errorf("compileQuick(%s) = %t, want %t", tt.schema, ok, tt.quick)
		}
	}
}
