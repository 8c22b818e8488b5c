package builtin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/host"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// newHost is the real application core on a temporary $BUB_HOME and
// workspace, with the default spill threshold.
func newHost(t *testing.T) (*host.Host, *providers.Connection, string) {
	t.Helper()
	ws := t.TempDir()
	h, err := host.New(&host.Options{Config: config.Default(), Home: t.TempDir(), Workspace: ws,
		Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("host.New: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("host.Close: %v", err)
		}
	})
	conn := &providers.Connection{Transport: "test", Profile: config.DefaultProfile}
	if err := h.Resolve(t.Context(), conn); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return h, conn, ws
}

func hostCall(t *testing.T, h *host.Host, conn *providers.Connection, tool string, args any) registry.Result {
	t.Helper()
	tl, err := h.Registry().Lookup(tool)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(args)
	return h.Call(t.Context(), conn, tl, registry.Call{Args: raw}, nil)
}

var spillHandleRE = regexp.MustCompile(`handle: ([0-9a-f]{32})\]`)

func TestSpillRoundTrip(t *testing.T) {
	h, conn, ws := newHost(t)
	// 200 000 characters, multi-byte ones included, so chunks split
	// between characters are exercised; no trailing whitespace, which
	// bash strips.
	var b strings.Builder
	for i := 0; utf8.RuneCountInString(b.String()) < 200_000; i++ {
		fmt.Fprintf(&b, "line %06d héllo wörld ✓\n", i)
	}
	runes := []rune(b.String())[:200_000]
	runes[len(runes)-1] = 'x'
	want := string(runes)
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}

	res := hostCall(t, h, conn, "bash", map[string]any{"command": "cat big.txt"})
	if res.Err != nil {
		t.Fatalf("bash: %v", res.Err)
	}
	if !strings.HasPrefix(res.Text, "[tool output spilled: ") || len(res.Text) > 2000 {
		t.Fatalf("bash output was not spilled: %.300q", res.Text)
	}
	m := spillHandleRE.FindStringSubmatch(res.Text)
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
		r := hostCall(t, h, conn, "spill.read", map[string]any{"handle": handle, "cursor": cursor, "count": 4})
		if r.Err != nil {
			t.Fatalf("spill.read cursor=%d: %v", cursor, r.Err)
		}
		page := r.Value.(SpillReadResult)
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
		t.Errorf("spill round trip lost data: got %d chars, want %d", utf8.RuneCountInString(got.String()), utf8.RuneCountInString(want))
	}

	// The tail, from the end.
	r := hostCall(t, h, conn, "spill.read", map[string]any{"handle": handle, "from_end": true})
	if r.Err != nil || !strings.HasSuffix(want, r.Value.(SpillReadResult).Content) {
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
		r := hostCall(t, h, conn, "spill.read", tt.args)
		if r.Err == nil || r.Err.Kind != tt.kind || r.Err.Message != tt.message {
			t.Errorf("spill.read(%v) = %v; want [%s] %s", tt.args, r.Err, tt.kind, tt.message)
		}
	}
}

func TestSpillReadWithoutSession(t *testing.T) {
	exec := registry.NewExecutor(registry.Default, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
	res := exec.Call(t.Context(), registry.Call{Tool: "spill.read", Args: []byte(`{"handle":"h"}`)})
	if res.Err == nil || res.Err.Kind != registry.KindConfig || res.Err.Message != "spill sidecar unavailable in this context." {
		t.Errorf("spill.read without session = %v", res.Err)
	}
}

// commas formats n like Python's "{:,}".
func commas(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
