package codemode_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// TestStubError checks that Stub's errors lead with the package, as they
// did before the compiler moved to pystub.
func TestStubError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools []*registry.Tool
		want  string
	}{
		{
			name:  "bad input JSON",
			tools: []*registry.Tool{{Name: "a", InputSchema: json.RawMessage(`{"type":`)}},
			want:  `codemode: tool "a": input schema: unexpected EOF`,
		},
		{
			name:  "same identifier",
			tools: []*registry.Tool{{Name: "mcp_search-docs"}, {Name: "mcp_search_docs"}},
			want:  `codemode: tools "mcp_search-docs" and "mcp_search_docs" both map to mcp_search_docs`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := codemode.Stub(tc.tools)
			if err == nil {
				t.Fatalf("Stub() succeeded; want error %s", tc.want)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("Stub() error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStubPath(t *testing.T) {
	home := filepath.Join("/", "home", "u", ".bub")
	first := codemode.StubPath(home, "/ws", "user/1", "stub")
	if again := codemode.StubPath(home, "/ws", "user/1", "stub"); again != first {
		t.Errorf("StubPath() = %q, then %q; want stable", first, again)
	}
	// sha256("/ws\x00user/1")[:16] and sha256("stub")[:12], computed with Python's hashlib.
	want := filepath.Join(home, "codemode", "4a241db87c9aef15", "tools-725c546b990d.pyi")
	if first != want {
		t.Errorf("StubPath() = %q; want %q", first, want)
	}
	pattern := regexp.MustCompile(`^` + regexp.QuoteMeta(home) + `/codemode/[0-9a-f]{16}/tools-[0-9a-f]{12}\.pyi$`)
	if !pattern.MatchString(first) {
		t.Errorf("StubPath() = %q; want it to match %s", first, pattern)
	}
	if other := codemode.StubPath(home, "/ws", "user/2", "stub"); filepath.Dir(other) == filepath.Dir(first) {
		t.Errorf("StubPath() for another session shares the directory %q", filepath.Dir(first))
	}
	if other := codemode.StubPath(home, "/other", "user/1", "stub"); filepath.Dir(other) == filepath.Dir(first) {
		t.Errorf("StubPath() for another workspace shares the directory %q", filepath.Dir(first))
	}
	if other := codemode.StubPath(home, "/ws", "user/1", "stub2"); filepath.Dir(other) != filepath.Dir(first) || other == first {
		t.Errorf("StubPath() for new content = %q; want a new file next to %q", other, first)
	}
}
