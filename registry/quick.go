package registry

import (
	"encoding/json"
	"math"
	"unicode/utf8"
)

// quickSchema is an input schema in the subset of JSON Schema that most
// tool schemas use (types, properties, required, additionalProperties,
// enum, numeric and length bounds, items). Arguments that pass it are
// valid, so the general validator, which costs several times more, only
// runs for those that do not, and reports their errors. A schema using
// anything else has no quickSchema.
type quickSchema struct {
	types              uint8 // typeBits; 0 means any
	props              map[string]*quickSchema
	required           []string
	noExtra            bool // additionalProperties: false
	enum               []any
	hasEnum            bool
	min, max           float64
	exMin, exMax       float64
	hasMin, hasMax     bool
	hasExMin, hasExMax bool
	minLen, maxLen     int // -1: unset
	items              *quickSchema
	minItems           int
	maxItems           int // -1: unset
}

const (
	tObject uint8 = 1 << iota
	tArray
	tString
	tInteger
	tNumber
	tBoolean
	tNull
)

var typeBits = map[string]uint8{"object": tObject, "array": tArray, "string": tString,
	"integer": tInteger, "number": tNumber, "boolean": tBoolean, "null": tNull}

// annotations are keywords that never affect validity.
var annotations = map[string]bool{"description": true, "title": true, "default": true,
	"examples": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true}

// compileQuick returns s's quickSchema, or false when s uses a keyword or
// form outside the subset.
func compileQuick(s map[string]any) (*quickSchema, bool) {
	q := &quickSchema{minLen: -1, maxLen: -1, maxItems: -1}
	for k, v := range s {
		switch {
		case annotations[k]:
		case k == "type":
			switch t := v.(type) {
			case string:
				b, ok := typeBits[t]
				if !ok {
					return nil, false
				}
				q.types = b
			case []any:
				for _, x := range t {
					s, _ := x.(string)
					b, ok := typeBits[s]
					if !ok {
						return nil, false
					}
					q.types |= b
				}
			default:
				return nil, false
			}
		case k == "properties":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			q.props = make(map[string]*quickSchema, len(m))
			for name, p := range m {
				pm, ok := p.(map[string]any)
				if !ok {
					return nil, false
				}
				if q.props[name], ok = compileQuick(pm); !ok {
					return nil, false
				}
			}
		case k == "required":
			l, ok := v.([]any)
			if !ok {
				return nil, false
			}
			for _, x := range l {
				s, ok := x.(string)
				if !ok {
					return nil, false
				}
				q.required = append(q.required, s)
			}
		case k == "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil, false
			}
			q.noExtra = !b
		case k == "enum":
			l, ok := v.([]any)
			if !ok {
				return nil, false
			}
			for _, x := range l {
				x = normalizeNumbers(x)
				switch x.(type) {
				case string, float64, bool, nil:
				default:
					return nil, false
				}
				q.enum = append(q.enum, x)
			}
			q.hasEnum = true
		case k == "minimum", k == "maximum", k == "exclusiveMinimum", k == "exclusiveMaximum":
			f, ok := number(v)
			if !ok {
				return nil, false
			}
			switch k {
			case "minimum":
				q.min, q.hasMin = f, true
			case "maximum":
				q.max, q.hasMax = f, true
			case "exclusiveMinimum":
				q.exMin, q.hasExMin = f, true
			default:
				q.exMax, q.hasExMax = f, true
			}
		case k == "minLength", k == "maxLength", k == "minItems", k == "maxItems":
			f, ok := number(v)
			if !ok || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
				return nil, false
			}
			switch k {
			case "minLength":
				q.minLen = int(f)
			case "maxLength":
				q.maxLen = int(f)
			case "minItems":
				q.minItems = int(f)
			default:
				q.maxItems = int(f)
			}
		case k == "items":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if q.items, ok = compileQuick(m); !ok {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return q, true
}

// number reads a schema number (json.Number from jsonschema.UnmarshalJSON).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil && !math.IsInf(f, 0)
	case float64:
		return x, true
	}
	return 0, false
}

// valid reports whether v, as encoding/json decodes into any, is valid.
// false means "not known valid": the general validator decides.
func (q *quickSchema) valid(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		if q.types != 0 && q.types&tObject == 0 {
			return false
		}
		for _, r := range q.required {
			if _, ok := x[r]; !ok {
				return false
			}
		}
		for k, e := range x {
			p, ok := q.props[k]
			if !ok {
				if q.noExtra {
					return false
				}
				continue
			}
			if !p.valid(e) {
				return false
			}
		}
		return !q.hasEnum
	case []any:
		if q.types != 0 && q.types&tArray == 0 {
			return false
		}
		if len(x) < q.minItems || (q.maxItems >= 0 && len(x) > q.maxItems) {
			return false
		}
		if q.items != nil {
			for _, e := range x {
				if !q.items.valid(e) {
					return false
				}
			}
		}
		return !q.hasEnum
	case string:
		if q.types != 0 && q.types&tString == 0 {
			return false
		}
		if q.minLen >= 0 || q.maxLen >= 0 {
			n := utf8.RuneCountInString(x)
			if n < q.minLen || (q.maxLen >= 0 && n > q.maxLen) {
				return false
			}
		}
	case float64:
		integral := x == math.Trunc(x) && !math.IsInf(x, 0)
		if q.types != 0 && q.types&tNumber == 0 && !(integral && q.types&tInteger != 0) {
			return false
		}
		if (q.hasMin && x < q.min) || (q.hasMax && x > q.max) ||
			(q.hasExMin && x <= q.exMin) || (q.hasExMax && x >= q.exMax) {
			return false
		}
	case bool:
		if q.types != 0 && q.types&tBoolean == 0 {
			return false
		}
	case nil:
		if q.types != 0 && q.types&tNull == 0 {
			return false
		}
	default:
		return false
	}
	if q.hasEnum {
		for _, e := range q.enum {
			if e == v {
				return true
			}
		}
		return false
	}
	return true
}
