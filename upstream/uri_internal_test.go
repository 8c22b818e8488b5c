package upstream

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// Namespaced URIs keep their scheme (ui:// stays ui://) and give the
// upstream's URI back exactly; URIs without "scheme://" are not mapped.
func TestURIMapping(t *testing.T) {
	for _, tc := range []struct{ uri, exposed string }{
		{"ui://widget/app.html", "ui://docs/widget/app.html"},
		{"demo://resource/static/document/a%20b.md", "demo://docs/resource/static/document/a%20b.md"},
		{"file:///etc/hosts", "file://docs//etc/hosts"},
		{"https://example.com/x?y=1#z", "https://docs/example.com/x?y=1#z"},
		{"demo://resource/dynamic/text/{resourceId}", "demo://docs/resource/dynamic/text/{resourceId}"},
		{"git+ssh://host/repo", "git+ssh://docs/host/repo"},
		{"x://", "x://docs/"},
	} {
		got, ok := exposedURI("docs", tc.uri)
		if !ok || got != tc.exposed {
			t.Errorf("exposedURI(%q) = %q, %v; want %q", tc.uri, got, ok, tc.exposed)
		}
		server, back, ok := originalURI(got)
		if !ok || server != "docs" || back != tc.uri {
			t.Errorf("originalURI(%q) = %q, %q, %v; want docs, %q", got, server, back, ok, tc.uri)
		}
	}
	for _, uri := range []string{"urn:isbn:1", "data:text/plain,x", "://x", "1a://x", "{scheme}://x/y", "no scheme"} {
		if got, ok := exposedURI("docs", uri); ok {
			t.Errorf("exposedURI(%q) = %q; want it refused", uri, got)
		}
	}
	for _, uri := range []string{"demo://", "demo:///x", "urn:x"} {
		if s, u, ok := originalURI(uri); ok {
			t.Errorf("originalURI(%q) = %q, %q; want it refused", uri, s, u)
		}
	}
}

// A tool's MCP App resource URI is namespaced in both of SEP-1865's forms;
// the tool's own _meta is not changed.
func TestExposedToolMeta(t *testing.T) {
	in := &mcp.Meta{AdditionalFields: map[string]any{
		"ui":             map[string]any{"resourceUri": "ui://widget/app.html", "visibility": []any{"model"}},
		"ui/resourceUri": "ui://widget/app.html",
		"other":          1,
	}}
	got := exposedToolMeta("docs", in)
	want := map[string]any{
		"ui":             map[string]any{"resourceUri": "ui://docs/widget/app.html", "visibility": []any{"model"}},
		"ui/resourceUri": "ui://docs/widget/app.html",
		"other":          1,
	}
	if diff := cmp.Diff(want, got.AdditionalFields); diff != "" {
		t.Errorf("rewritten _meta (-want +got):\n%s", diff)
	}
	if in.AdditionalFields["ui/resourceUri"] != "ui://widget/app.html" || in.AdditionalFields["ui"].(map[string]any)["resourceUri"] != "ui://widget/app.html" {
		t.Errorf("the tool's own _meta changed: %v", in.AdditionalFields)
	}
	plain := &mcp.Meta{AdditionalFields: map[string]any{"other": 1}}
	if exposedToolMeta("docs", plain) != plain || exposedToolMeta("docs", nil) != nil {
		t.Error("a _meta without an MCP App was copied")
	}
}
