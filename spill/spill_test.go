package spill

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/google/go-cmp/cmp"
)

var handleRE = regexp.MustCompile(`handle: ([0-9a-f]{32})\]`)

func TestHook(t *testing.T) {
	sess := newSession(t)
	tests := []struct {
		name      string
		tool      string
		args      string
		threshold int
		codeMode  bool
		noSession bool
		kind      registry.Kind // of the error, "" for a result
		want      string        // the output, or its prefix when it ends in "..."
	}{
		{"below", "big", `{"n":399}`, 100, false, false, "", strings.Repeat("x", 399)},
		{"at threshold*4", "big", `{"n":400}`, 100, false, false, "", "[tool output spilled: 400 bytes in 1 chunks; handle: ..."},
		{"characters count, not bytes", "big", `{"text":"` + strings.Repeat("é", 399) + `"}`, 100, false, false, "", strings.Repeat("é", 399)},
		{"disabled", "big", `{"n":5000}`, 0, false, false, "", strings.Repeat("x", 5000)},
		{"code mode never spills", "big", `{"n":5000}`, 100, true, false, "", strings.Repeat("x", 5000)},
		{"spill.read never spills", "spill.read", `{"handle":"` + strings.Repeat("h", 500) + `"}`, 100, false, false,
			registry.KindNotFound, "[no spilled tool result for handle '" + strings.Repeat("h", 500) + "']"},
		{"failures spill too", "big", `{"n":500,"fail":true}`, 100, false, false, registry.KindTool, "[tool output spilled: 5..."},
		{"no session: truncated", "big", `{"n":700}`, 100, false, true, "",
			"[tool output truncated: 700 bytes; spill storage failed]\n" + strings.Repeat("x", 300) + "\n...[100 chars omitted]...\n" + strings.Repeat("x", 300)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &registry.ToolContext{Session: sess, CodeMode: tt.codeMode}
			if tt.noSession {
				tc.Session = nil
			}
			res := newExec(t, tt.threshold).Call(t.Context(), registry.Call{Tool: tt.tool, Args: json.RawMessage(tt.args), Context: tc})
			got := res.Text
			var kind registry.Kind
			if res.Err != nil {
				got, kind = res.Err.Message, res.Err.Kind
			}
			if kind != tt.kind {
				t.Errorf("kind = %q; want %q (%v)", kind, tt.kind, res.Err)
			}
			if p, ok := strings.CutSuffix(tt.want, "..."); ok {
				if !strings.HasPrefix(got, p) {
					t.Errorf("output = %.120q; want prefix %.120q", got, p)
				}
			} else if got != tt.want {
				t.Errorf("output = %.120q; want %.120q", got, tt.want)
			}
		})
	}
}

// A huge result spills; spill.read pages it back whole, from the start
// and from the end, and refuses bad bounds with Bub's messages.
func TestRoundTrip(t *testing.T) {
	sess := newSession(t)
	exec := newExec(t, DefaultThreshold)
	tc := &registry.ToolContext{Session: sess}
	call := func(tool string, args any) registry.Result {
		t.Helper()
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		return exec.Call(t.Context(), registry.Call{Tool: tool, Args: raw, Context: tc})
	}
	// 200 000 characters, multi-byte ones included, so chunks split
	// between characters are exercised.
	var b strings.Builder
	for i := 0; utf8.RuneCountInString(b.String()) < 200_000; i++ {
		fmt.Fprintf(&b, "line %06d héllo wörld ✓\n", i)
	}
	want := string([]rune(b.String())[:200_000])

	res := call("big", map[string]any{"text": want})
	if res.Err != nil {
		t.Fatalf("big: %v", res.Err)
	}
	if !strings.HasPrefix(res.Text, "[tool output spilled: ") || len(res.Text) > 2000 {
		t.Fatalf("output was not spilled: %.300q", res.Text)
	}
	m := handleRE.FindStringSubmatch(res.Text)
	if m == nil {
		t.Fatalf("no handle in %q", res.Text)
	}
	handle := m[1]
	if !strings.Contains(res.Text, "[read with: spill_read(handle='"+handle+"', cursor=0, count=1, from_end=False)]") {
		t.Errorf("reference lacks the read hint: %q", res.Text)
	}

	var got strings.Builder
	cursor, pages := 0, 0
	for {
		r := call("spill.read", map[string]any{"handle": handle, "cursor": cursor, "count": 4})
		if r.Err != nil {
			t.Fatalf("spill.read cursor=%d: %v", cursor, r.Err)
		}
		page := r.Value.(ReadResult)
		header, content, ok := strings.Cut(r.Text, "\ncontent:\n")
		if !ok || content != page.Content {
			t.Fatalf("spill.read text does not end with the page content: %.200q", r.Text)
		}
		if pages == 0 {
			wantHeader := fmt.Sprintf("[spilled tool result: %s bytes, %d chunks]\nchunks: 0-3\nnext_cursor: 4\ncomplete: false",
				commas(len(want)), page.Chunks)
			if header != wantHeader {
				t.Errorf("first page header = %q; want %q", header, wantHeader)
			}
		}
		got.WriteString(page.Content)
		pages++
		cursor = page.NextCursor
		if page.Complete {
			break
		}
		if pages > 100 {
			t.Fatal("spill.read never completes")
		}
	}
	if got.String() != want {
		t.Errorf("round trip lost data: got %d chars, want %d", utf8.RuneCountInString(got.String()), utf8.RuneCountInString(want))
	}
	if r := call("spill.read", map[string]any{"handle": handle, "from_end": true}); r.Err != nil || !strings.HasSuffix(want, r.Value.(ReadResult).Content) {
		t.Errorf("spill.read from_end = %v %v", r.Value, r.Err)
	}

	failures := []struct {
		args    map[string]any
		kind    registry.Kind
		message string
	}{
		{map[string]any{"handle": handle, "cursor": -1}, registry.KindInvalidInput, "`cursor` must be >= 0."},
		{map[string]any{"handle": handle, "count": 0}, registry.KindInvalidInput, "`count` must be >= 1."},
		{map[string]any{"handle": "nope"}, registry.KindNotFound, "[no spilled tool result for handle 'nope']"},
	}
	for _, tt := range failures {
		r := call("spill.read", tt.args)
		if r.Err == nil || r.Err.Kind != tt.kind || r.Err.Message != tt.message {
			t.Errorf("spill.read(%v) = %v; want [%s] %s", tt.args, r.Err, tt.kind, tt.message)
		}
	}
}

func TestReadWithoutSession(t *testing.T) {
	res := newExec(t, DefaultThreshold).Call(t.Context(), registry.Call{Tool: "spill.read", Args: []byte(`{"handle":"h"}`)})
	if res.Err == nil || res.Err.Kind != registry.KindConfig || res.Err.Message != "spill sidecar unavailable in this context." {
		t.Errorf("spill.read without session = %v", res.Err)
	}
}

func TestReference(t *testing.T) {
	long := strings.Repeat("a", 300) + strings.Repeat("é", 1400) + strings.Repeat("z", 300)
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"short text shown whole",
			Reference(sessions.SpillRef{Handle: "0123456789abcdef0123456789abcdef", Bytes: 40012, Chunks: 3}, "hello\nworld"),
			"[tool output spilled: 40,012 bytes in 3 chunks; handle: 0123456789abcdef0123456789abcdef]\n" +
				"[read with: spill_read(handle='0123456789abcdef0123456789abcdef', cursor=0, count=1, from_end=False)]\n" +
				"hello\nworld"},
		{"exactly 600 characters shown whole",
			Reference(sessions.SpillRef{Handle: "h", Bytes: 1234567, Chunks: 1000}, strings.Repeat("日", 600)),
			"[tool output spilled: 1,234,567 bytes in 1,000 chunks; handle: h]\n" +
				"[read with: spill_read(handle='h', cursor=0, count=1, from_end=False)]\n" +
				strings.Repeat("日", 600)},
		{"long text previewed by characters",
			Reference(sessions.SpillRef{Handle: "h", Bytes: 999, Chunks: 1}, long),
			"[tool output spilled: 999 bytes in 1 chunks; handle: h]\n" +
				"[read with: spill_read(handle='h', cursor=0, count=1, from_end=False)]\n" +
				strings.Repeat("a", 300) + "\n...[1,400 chars omitted]...\n" + strings.Repeat("z", 300)},
		{"handle quoted as Python's repr",
			Reference(sessions.SpillRef{Handle: "it's\n", Bytes: 1, Chunks: 1}, "x"),
			"[tool output spilled: 1 bytes in 1 chunks; handle: it's\n]\n" +
				"[read with: spill_read(handle=\"it's\\n\", cursor=0, count=1, from_end=False)]\nx"},
		{"failure previewed",
			Failure(long),
			"[tool output truncated: 3,400 bytes; spill storage failed]\n" +
				strings.Repeat("a", 300) + "\n...[1,400 chars omitted]...\n" + strings.Repeat("z", 300)},
		{"failure counts replaced bytes",
			Failure("a\xffb"),
			"[tool output truncated: 5 bytes; spill storage failed]\na\xffb"},
		{"short failure", Failure("tiny"), "[tool output truncated: 4 bytes; spill storage failed]\ntiny"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadResultString(t *testing.T) {
	tests := []struct {
		page ReadResult
		want string
	}{
		{ReadResult{Handle: "h", Bytes: 81920, Chunks: 5, First: 3, Last: 3, NextCursor: 2, Content: "dd"},
			"[spilled tool result: 81,920 bytes, 5 chunks]\nchunks: 3-3\nnext_cursor: 2\ncomplete: false\ncontent:\ndd"},
		{ReadResult{Handle: "h", Bytes: 81920, Chunks: 5, First: -1, Last: -1, NextCursor: 5, Complete: true},
			"[spilled tool result: 81,920 bytes, 5 chunks]\nchunks: none\nnext_cursor: 5\ncomplete: true\ncontent:\n"},
	}
	for _, tt := range tests {
		if got := tt.page.String(); got != tt.want {
			t.Errorf("%+v.String() = %q; want %q", tt.page, got, tt.want)
		}
	}
}

func TestThreshold(t *testing.T) {
	n := func(v int) *int { return &v }
	tests := []struct {
		name    string
		config  *int
		env     string
		want    int
		wantErr string
	}{
		{"default", nil, "", DefaultThreshold, ""},
		{"env", nil, "100", 100, ""},
		{"env zero disables", nil, "0", 0, ""},
		{"config wins over env", n(7), "100", 7, ""},
		{"config alone", n(0), "", 0, ""},
		{"bad env", nil, "lots", 0, `BUB_SPILL_THRESHOLD="lots": want a whole number >= 0`},
		{"negative env", nil, "-1", 0, `BUB_SPILL_THRESHOLD="-1": want a whole number >= 0`},
		{"bad env even with config", n(7), "x", 0, `BUB_SPILL_THRESHOLD="x": want a whole number >= 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Module{SpillThreshold: tt.config}
			got, err := m.Threshold(func(k string) string {
				if k == "BUB_SPILL_THRESHOLD" {
					return tt.env
				}
				return ""
			})
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tt.want || gotErr != tt.wantErr {
				t.Errorf("Threshold() = %d, %q; want %d, %q", got, gotErr, tt.want, tt.wantErr)
			}
		})
	}
}
