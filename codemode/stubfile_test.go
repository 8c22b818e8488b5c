package codemode_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/codemode/pystub"
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

func TestWriteStub(t *testing.T) {
	home := t.TempDir()
	content, err := pystub.Generate([]pystub.Tool{{
		Name:        "orders_get",
		Description: "Look up an order by id.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	path, err := codemode.WriteStub(home, "/ws", "user/1", content)
	if err != nil {
		t.Fatal(err)
	}
	if want := codemode.StubPath(home, "/ws", "user/1", content); path != want {
		t.Errorf("WriteStub() = %q; want %q", path, want)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != content {
		t.Errorf("WriteStub() wrote %q; want %q", got, content)
	}
	checkMode(t, path, 0o600)
	checkMode(t, filepath.Dir(path), 0o700|fs.ModeDir)

	// An existing stub is never rewritten: its name already says what is in it.
	if err := os.WriteFile(path, []byte("marker"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := codemode.WriteStub(home, "/ws", "user/1", content)
	if err != nil || again != path {
		t.Fatalf("WriteStub() again = %q, %v; want %q", again, err, path)
	}
	if got, _ := os.ReadFile(path); string(got) != "marker" {
		t.Errorf("WriteStub() rewrote an existing stub")
	}
	checkNoTemp(t, home)
}

func TestWriteStubConcurrent(t *testing.T) {
	home := t.TempDir()
	var wg sync.WaitGroup
	paths := make([]string, 16)
	for i := range paths {
		wg.Go(func() {
			path, err := codemode.WriteStub(home, "/ws", "s", fmt.Sprintf("content %d\n", i%2))
			if err != nil {
				t.Error(err)
			}
			paths[i] = path
		})
	}
	wg.Wait()
	for i, path := range paths {
		if path != paths[i%2] {
			t.Errorf("WriteStub() #%d = %q; want %q", i, path, paths[i%2])
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != fmt.Sprintf("content %d\n", i%2) {
			t.Errorf("stub %q = %q, %v", path, got, err)
		}
	}
	checkNoTemp(t, home)
}

func TestWriteStubError(t *testing.T) {
	home := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(home, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := codemode.WriteStub(home, "/ws", "s", "x"); err == nil || !strings.HasPrefix(err.Error(), "codemode: write stub: ") {
		t.Errorf("WriteStub(home is a file) error = %v; want a codemode: write stub error", err)
	}
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode(); got != want {
		t.Errorf("mode of %s = %v; want %v", path, got, want)
	}
}

func checkNoTemp(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".pyi") {
			t.Errorf("leftover file %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
