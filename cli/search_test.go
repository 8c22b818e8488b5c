package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestStdioSearchTools: the built binary lists fs_grep and fs_glob with
// read-only annotations and answers calls to both over stdio.
func TestStdioSearchTools(t *testing.T) {
	s := startStdio(t, "default")
	for name, content := range map[string]string{"a.go": "package a\n// TODO: grep me\n", "ignored/b.go": "// TODO: not me\n", ".gitignore": "ignored/\n"} {
		p := filepath.Join(s.ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type hints struct{ ReadOnly, Destructive, Idempotent, OpenWorld bool }
	got := map[string]hints{}
	for _, tl := range res.Tools {
		if tl.Name != "fs_grep" && tl.Name != "fs_glob" {
			continue
		}
		a := tl.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Fatalf("%s: annotations %+v incomplete", tl.Name, a)
		}
		got[tl.Name] = hints{*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint}
	}
	want := map[string]hints{"fs_grep": {ReadOnly: true, Idempotent: true}, "fs_glob": {ReadOnly: true, Idempotent: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("search tools' hints (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"fs_grep", map[string]any{"pattern": "TODO", "output_mode": "content"}, "a.go:2:// TODO: grep me"},
		{"fs_glob", map[string]any{"pattern": "**/*.go"}, "a.go"},
	} {
		r, err := callTool(t.Context(), s.c, tt.tool, tt.args, nil)
		if err != nil {
			t.Fatal(err)
		}
		if text := strings.TrimSpace(resultText(r)); r.IsError || text != tt.want {
			t.Errorf("%s(%v) = %q (error %v); want %q", tt.tool, tt.args, text, r.IsError, tt.want)
		}
	}
}
