package upstream_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
)

// Deferred tools are left out of tools/list, named in the instructions'
// catalog and callable by name; tool.describe returns their definitions
// and loads them into the session (which survives a restart), whose
// tools/list then includes them, and the client is told.
func TestDeferredLoading(t *testing.T) {
	memCmd, memArgs := npmServer(t, "server-memory")
	home := t.TempDir()
	src := everything(t, "defer = true") + stdioTable("memory", memCmd, memArgs, `env = { MEMORY_FILE_PATH = "`+home+`/memory.jsonl" }`)
	h := newHost(t, src, home)
	v, err := h.View(t.Context(), h.conn)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.Instructions, "\n- everything_echo: Echoes back the input string") ||
		!strings.Contains(v.Instructions, "\n- everything_get-sum: Returns the sum of two numbers") {
		t.Errorf("instructions lack the catalog:\n%s", v.Instructions)
	}
	via, _ := h.serve(t)
	changed := make(chan struct{}, 16)
	via.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	listed := func() []string {
		t.Helper()
		res, err := via.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	names := listed()
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "everything_") }) ||
		!slices.Contains(names, "memory_read_graph") || !slices.Contains(names, "tool_describe") {
		t.Fatalf("tools/list %v; want memory's and tool_describe, no everything_*", names)
	}

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := via.CallTool(t.Context(), req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	if res := call("everything_echo", map[string]any{"message": "unlisted"}); res.IsError || allText(res) != "Echo: unlisted" {
		t.Fatalf("deferred tool by name: %+v", res)
	}
	res := call("tool_describe", map[string]any{"names": []string{"everything_echo", "everything.get-sum", "memory_read_graph"}})
	if res.IsError {
		t.Fatalf("tool_describe: %s", allText(res))
	}
	var got struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Loaded []string `json:"loaded"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Tools) != 3 || got.Tools[1].Name != "everything_get-sum" || !strings.Contains(string(got.Tools[1].InputSchema), `"a"`) ||
		!slices.Equal(got.Loaded, []string{"everything.echo", "everything.get-sum"}) {
		t.Fatalf("tool_describe = %s", raw)
	}
	deadline := time.Now().Add(30 * time.Second)
	for names = listed(); !slices.Contains(names, "everything_get-sum"); names = listed() {
		if time.Now().After(deadline) {
			t.Fatalf("tools/list %v after describe", names)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Contains(names, "everything_echo") || slices.Contains(names, "everything_get-tiny-image") {
		t.Errorf("tools/list %v; want exactly the described everything_* tools", names)
	}
	listed() // carries what is still queued
	if len(changed) == 0 {
		t.Error("no notifications/tools/list_changed after tool_describe")
	}
	sess, err := h.Session(h.conn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sess.Settings().LoadedTools; !slices.Equal(got, []string{"everything.echo", "everything.get-sum"}) {
		t.Errorf("session records %v", got)
	}
	if res := call("tool_describe", map[string]any{"names": []string{"nosuch_tool"}}); !res.IsError || !strings.Contains(allText(res), "nosuch_tool") {
		t.Errorf("unknown name: %s", allText(res))
	}

	// The session keeps what it loaded across a restart.
	h.Close()
	h2 := newHost(t, src, home)
	v2, err := h2.View(t.Context(), h2.conn)
	if err != nil {
		t.Fatal(err)
	}
	listedAgain := map[string]bool{}
	for _, tl := range v2.Tools {
		listedAgain[tl.Name] = true
	}
	if !listedAgain["everything.get-sum"] || !listedAgain["everything.echo"] || listedAgain["everything.get-tiny-image"] {
		t.Errorf("after a restart the session lists %v; want the loaded everything tools only", listedAgain)
	}
}

// In code mode deferred tools are code tools like any other: in the stub,
// callable from run_code.
func TestDeferredInCodeMode(t *testing.T) {
	needCmd(t, "python3")
	h := newHost(t, everything(t, "defer = true")+"[profiles.default]\ncode_mode = true\n", "", "codemode")
	res := h.call(t.Context(), "run_code", map[string]any{"code": "print(await tools.everything_get_sum(a=1, b=2))"})
	if res.Err != nil || !strings.Contains(res.Text, "The sum of 1 and 2 is 3.") {
		t.Fatalf("run_code: %q, %v", res.Text, res.Err)
	}
}

// Any tool registered as deferred gets the same treatment, without any
// upstream server.
func TestDeferredPluginTool(t *testing.T) {
	reg := registry.New()
	tool := registry.MustNewTool("orders.get", "Look up an order. By id.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		ID string `json:"id"`
	}) (string, error) {
		return "order " + in.ID, nil
	})
	tool.Deferred = true
	reg.MustRegister(tool)
	cfg, err := config.Parse("bub.toml", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: reg, Modules: []string{"upstream"}, Home: home, Workspace: home, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	conn := &providers.Connection{Transport: "test", Profile: "default"}
	if err := a.Resolve(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	v, err := a.View(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Lookup("tool_describe"); !ok || len(v.Deferred) != 1 || !strings.Contains(v.Instructions, "- orders_get: Look up an order.") {
		t.Fatalf("view: tools %d, deferred %d, instructions %q", len(v.Tools), len(v.Deferred), v.Instructions)
	}
	if !a.ToolsChangeable() {
		t.Error("loading a deferred tool changes tool lists, but the App does not say so")
	}
	res := a.Call(t.Context(), conn, app.Request{Tool: "tool.describe", Args: json.RawMessage(`{"names":["orders.get"]}`)})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if v, _ = a.View(t.Context(), conn); len(v.Deferred) != 0 {
		t.Errorf("still deferred after describe: %v", v.Deferred)
	}
	if _, ok := v.Lookup("orders_get"); !ok {
		t.Error("orders_get not listed after describe")
	}
}
