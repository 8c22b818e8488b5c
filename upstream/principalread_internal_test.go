package upstream

import (
	"testing"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// A resource of an auth = "oauth" server (an MCP App's ui:// page, which
// its tool's _meta names) is read as the caller, over the caller's own
// connection with the caller's own token, as its tools are called: such a
// server has no shared connection to read it over.
func TestResourceReadAsPrincipal(t *testing.T) {
	h := newOAuthHost(t, "start_timeout = \"5s\"\n", map[string]string{"p1": "tok-p1"})
	got, err := h.m.read(t.Context(), &registry.Connection{Principal: "p1"}, mcpserver.ReadRequest{URI: "ui://up/widget/app.html"})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	want := []mcpserver.ResourceContents{{URI: "ui://up/widget/app.html", MIMEType: "text/html", Text: "<p>widget</p>"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read (-want +got):\n%s", diff)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen["Bearer tok-p1"] == 0 {
		t.Errorf("no request carried p1's token; the server saw %v", h.seen)
	}
	if _, err := h.m.read(t.Context(), &registry.Connection{Principal: "p2"}, mcpserver.ReadRequest{URI: "ui://up/widget/app.html"}); err == nil {
		t.Error("p2, who has no token, read the resource")
	}
}

// A principal's connection saying its resources or prompts changed does
// not list them into the catalog every caller sees: what the server lists
// for one principal's token is that principal's.
func TestPrincipalListNotShared(t *testing.T) {
	h := newOAuthHost(t, "", map[string]string{"p1": "tok-p1"})
	s, release, err := h.u.principalSession(t.Context(), nil, "p1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, method := range []mcp.MCPMethod{mcp.MethodNotificationResourcesListChanged, mcp.MethodNotificationPromptsListChanged} {
		h.u.notification(s, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: string(method)}})
		// A list would be running now (ask starts it at once), or have
		// filled the catalog (before it stops running).
		c := &h.u.catalog
		c.refresh.mu.Lock()
		listing := c.refresh.running
		c.refresh.mu.Unlock()
		c.mu.Lock()
		listed := len(c.resources) + len(c.prompts)
		c.mu.Unlock()
		if listing || listed > 0 {
			t.Errorf("%s on p1's connection listed the catalog over it (running %v, %d entries)", method, listing, listed)
		}
	}
}
