package toolsearch_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
)

// TestSearchOverMCP: a client of the three reference servers, deferred,
// lists tool_describe and tool_search; tool_search finds get-sum, the
// client is told the list changed, lists it and calls it.
func TestSearchOverMCP(t *testing.T) {
	home := t.TempDir()
	a := newApp(t, reference(t, home, "defer = true"), nil)
	srv, err := mcpserver.New(&mcpserver.Options{Backend: a, Registry: a.Registry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	handler := streamhttp.New(srv, streamhttp.Options{Profiles: a.Config().ProfileNames(), Loopback: true})
	closeSessions := handler.CloseSessions
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	//lint:ignore SA1019 the 2025 session protocol on purpose: its GET stream carries list_changed
	tr, err := transport.NewStreamableHTTP(ts.URL+"/mcp", transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	changed := make(chan struct{}, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	listed := func() []string {
		t.Helper()
		res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	call := func(name string, args map[string]any) string {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(t.Context(), req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var text strings.Builder
		for _, ct := range res.Content {
			if tc, ok := ct.(mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if res.IsError {
			t.Fatalf("%s: %s", name, text.String())
		}
		return text.String()
	}
	if diff := cmp.Diff([]string{"tool_describe", "tool_search"}, listed()); diff != "" {
		t.Fatalf("tools/list (-want +got):\n%s", diff)
	}
	var found struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Loaded []string `json:"loaded"`
	}
	if err := json.Unmarshal([]byte(call("tool_search", map[string]any{"query": "add two numbers", "limit": 1})), &found); err != nil {
		t.Fatal(err)
	}
	if len(found.Tools) != 1 || found.Tools[0].Name != "everything_get-sum" || !strings.Contains(string(found.Tools[0].InputSchema), `"a"`) {
		t.Fatalf("tool_search found %+v", found)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after tool_search loaded a tool")
	}
	if diff := cmp.Diff([]string{"everything_get-sum", "tool_describe", "tool_search"}, listed()); diff != "" {
		t.Errorf("tools/list after the search (-want +got):\n%s", diff)
	}
	if got := call("everything_get-sum", map[string]any{"a": 2, "b": 3}); !strings.Contains(got, "5") {
		t.Errorf("everything_get-sum(2, 3) = %q", got)
	}
}
