package sessions

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEncodeObject pins the bytes a payload becomes on a tape line:
// encoding/json's, with sorted keys, but HTML characters left as they are
// (Python's ensure_ascii=False writes them raw, and Bub reads both).
func TestEncodeObject(t *testing.T) {
	type point struct{ X, Y int }
	tests := []struct {
		name string
		in   map[string]any
		want string
	}{
		{"nil", nil, `{}`},
		{"scalars", map[string]any{"s": "plain", "b": true, "n": nil, "f": 1.5, "i": 42, "u": uint64(1 << 60), "big": 1e21, "tiny": 1e-7, "neg0": math.Copysign(0, -1)},
			`{"b":true,"big":1e+21,"f":1.5,"i":42,"n":null,"neg0":-0,"s":"plain","tiny":1e-7,"u":1152921504606846976}`},
		{"escapes", map[string]any{"q": `say "hi"\`, "ctl": "a\nb\tc\x01", "html": "<a href='x'>&</a>", "sep": "x\u2028y\u2029z"},
			`{"ctl":"a\nb\tc\u0001","html":"<a href='x'>&</a>","q":"say \"hi\"\\","sep":"x\u2028y\u2029z"}`},
		{"unicode", map[string]any{"u": "héllo 日本 🎉", "key é": "v"}, `{"key é":"v","u":"héllo 日本 🎉"}`},
		{"invalid utf8", map[string]any{"bad": "a\xffb", "bad\xffkey": 1}, `{"bad":"a\ufffdb","bad\ufffdkey":1}`},
		{"nested", map[string]any{"m": map[string]any{"z": []any{1, "two"}, "a": nil}, "ss": []string{"x"}, "nil": map[string]any(nil)},
			`{"m":{"a":null,"z":[1,"two"]},"nil":null,"ss":["x"]}`},
		{"other types", map[string]any{"struct": point{1, 2}, "num": json.Number("12.50"), "raw": json.RawMessage("{ \"k\": [1] }"), "time": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			`{"num":12.50,"raw":{"k":[1]},"struct":{"X":1,"Y":2},"time":"2026-01-02T03:04:05Z"}`},
	}
	for _, tt := range tests {
		got, err := encodeObject(tt.in)
		if err != nil {
			t.Errorf("%s: encodeObject error: %v", tt.name, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s: encodeObject = %s; want %s", tt.name, got, tt.want)
		}
	}
	if got, want := string(AppendString([]byte("x:"), "<\"é\"\n>")), `x:"<\"é\"\n>"`; got != want {
		t.Errorf("AppendString = %s; want %s", got, want)
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
		if _, err := encodeObject(v); err == nil {
			t.Errorf("encodeObject(%s) error = nil; want an error", name)
		}
	}
}

// TestDraftCopyDoesNotAlias checks that the decoded copy an event keeps is
// the tape's own: the caller may go on changing its maps.
func TestDraftCopyDoesNotAlias(t *testing.T) {
	inner := map[string]any{"k": "v"}
	list := []any{"a", 1}
	d, err := makeDraft(KindEvent, map[string]any{"inner": inner, "list": list}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inner["k"] = "changed"
	list[0] = "changed"
	want := map[string]any{"inner": map[string]any{"k": "v"}, "list": []any{"a", 1.0}}
	if diff := cmp.Diff(want, d.p); diff != "" {
		t.Errorf("copy changed with the caller's maps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{}, d.m); diff != "" {
		t.Errorf("copy of a nil meta (-want +got):\n%s", diff)
	}
}
