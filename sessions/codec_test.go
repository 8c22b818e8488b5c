package sessions

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// stdEncode is the reference: encoding/json without HTML escaping, then
// decoded back.
func stdEncode(t *testing.T, v map[string]any) ([]byte, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return b, m
}

func TestEncodeObjectMatchesEncodingJSON(t *testing.T) {
	type point struct {
		X, Y int
	}
	tests := map[string]map[string]any{
		"scalars":      {"s": "plain", "b": true, "n": nil, "f": 1.5, "i": 42, "i64": int64(-7), "u": uint64(1 << 60), "big": 1e21, "tiny": 1e-7, "neg0": math.Copysign(0, -1)},
		"escapes":      {"q": `say "hi"\`, "ctl": "a\nb\tc\x01\b\f", "html": "<a href='x'>&</a>", "sep": "x\u2028y\u2029z"},
		"unicode":      {"u": "héllo 日本 🎉", "key é": "v"},
		"invalid utf8": {"bad": "a\xffb\xfe\xfd", "bad\xffkey": 1},
		"nested":       {"m": map[string]any{"z": []any{1, "two", []any{}, map[string]any{}}, "a": nil}, "ss": []string{"x", "y"}},
		"typed nils":   {"m": map[string]any(nil), "l": []any(nil), "s": []string(nil)},
		"slow path":    {"struct": point{1, 2}, "f32": float32(0.1), "bytes": []byte("hi"), "time": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "num": json.Number("12.50"), "raw": json.RawMessage(`{"k":[1]}`), "ms": map[string]string{"a": "b"}, "int8": int8(3)},
	}
	for name, v := range tests {
		t.Run(name, func(t *testing.T) {
			wantB, wantM := stdEncode(t, v)
			gotB, gotM, err := encodeObject(v)
			if err != nil {
				t.Fatalf("encodeObject error: %v", err)
			}
			if !bytes.Equal(gotB, wantB) {
				t.Errorf("encodeObject bytes = %s; want %s", gotB, wantB)
			}
			if diff := cmp.Diff(wantM, gotM); diff != "" {
				t.Errorf("encodeObject copy (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeObjectErrors(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	tests := map[string]map[string]any{
		"NaN":   {"x": math.NaN()},
		"Inf":   {"x": []any{math.Inf(1)}},
		"func":  {"x": func() {}},
		"chan":  {"x": make(chan int)},
		"cycle": cyclic,
	}
	for name, v := range tests {
		if _, _, err := encodeObject(v); err == nil {
			t.Errorf("encodeObject(%s) error = nil; want an error", name)
		}
	}
}

func TestEncodeObjectDoesNotAlias(t *testing.T) {
	inner := map[string]any{"k": "v"}
	list := []any{"a"}
	_, c, err := encodeObject(map[string]any{"inner": inner, "list": list})
	if err != nil {
		t.Fatal(err)
	}
	inner["k"] = "changed"
	list[0] = "changed"
	want := map[string]any{"inner": map[string]any{"k": "v"}, "list": []any{"a"}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("copy changed with the caller's maps (-want +got):\n%s", diff)
	}
}

func FuzzEncodeObject(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[true,null,"x\u2028"],"c":{"d":1e-7,"e":-0.0}}`))
	f.Add([]byte(`{"s":"<>&\"\\\u0001","n":123456789012345678901234567890}`))
	f.Add([]byte(`{"é":"日本","f":1.7976931348623157e308,"g":5e-324}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var v map[string]any
		if json.Unmarshal(in, &v) != nil || v == nil {
			return
		}
		wantB, wantM := stdEncode(t, v)
		gotB, gotM, err := encodeObject(v)
		if err != nil {
			t.Fatalf("encodeObject(%s) error: %v", in, err)
		}
		if !bytes.Equal(gotB, wantB) {
			t.Fatalf("encodeObject(%s) = %s; want %s", in, gotB, wantB)
		}
		if diff := cmp.Diff(wantM, gotM); diff != "" {
			t.Fatalf("encodeObject(%s) copy (-want +got):\n%s", in, diff)
		}
		// The no-copy path (entries kept only as their line) writes the same bytes.
		if onlyB, onlyM, err := appendObject(nil, v, false); err != nil || !bytes.Equal(onlyB, gotB) || onlyM != nil {
			t.Fatalf("appendObject(%s, keep=false) = %s, %v, %v; want %s, nil, nil", in, onlyB, onlyM, err, gotB)
		}
		if strings.Contains(string(gotB), "\n") {
			t.Fatalf("encoded object contains a raw newline: %q", gotB)
		}
	})
}
