package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

const (
	legacy = mcp.ProtocolVersion20251125
	modern = "2026-07-28"
)

// testToken's SHA-256 is configured for the "ro" profile.
const testToken = "s3cret-token"

type orderOut struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// fixture is one server over a test registry.
type fixture struct {
	url      string
	home     string
	host     *app.App
	cancels  atomic.Int64 // how many test.slow calls saw cancellation
	started  chan struct{}
	tokenCfg bool
}

func testRegistry(f *fixture) *registry.Registry {
	r := registry.New()
	r.MustRegister(registry.MustNewTool("test.echo", "Echo a message.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Message string `json:"message"`
	}) (string, error) {
		return "Echo: " + in.Message, nil
	}))
	r.MustRegister(registry.MustNewTool("orders.get", "Look up an order.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		OrderID string `json:"order_id"`
	}) (orderOut, error) {
		if in.OrderID == "missing" {
			return orderOut{}, registry.NewError(registry.KindNotFound, "order missing not found", nil)
		}
		return orderOut{ID: in.OrderID, Status: "shipped"}, nil
	}, registry.WithRenderer(func(o orderOut) string { return "order " + o.ID + ": " + o.Status })))
	r.MustRegister(registry.MustNewTool("test.progress", "Report progress three times.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		for i := 1; i <= 3; i++ {
			tc.Progress(ctx, float64(i), 3, fmt.Sprintf("step %d", i))
		}
		return "done", nil
	}))
	r.MustRegister(registry.MustNewTool("test.slow", "Wait until cancelled.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		select {
		case f.started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		f.cancels.Add(1)
		return "", ctx.Err()
	}))
	r.MustRegister(registry.MustNewTool("admin.secret", "Only for the default profile.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return "secret", nil
	}))
	r.MustRegister(registry.MustNewTool("admin.command", "Command only.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return "cmd", nil
	}, registry.WithCommandOnly()))
	return r
}

const testConfig = `
[profiles.default]

[profiles.ro]
tools = ["test.*", "orders.*"]
deny = ["test.slow"]
`

func newFixture(t *testing.T, withTokens bool) *fixture {
	t.Helper()
	f := &fixture{home: t.TempDir(), started: make(chan struct{}, 1), tokenCfg: withTokens}
	src := testConfig
	if withTokens {
		src += fmt.Sprintf("\n[[auth.tokens]]\nname = \"ci\"\nsha256 = %q\nprofile = \"ro\"\n", config.HashToken(testToken))
	}
	cfg, err := config.Parse("test.toml", src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := testRegistry(f)
	log := slog.New(slog.DiscardHandler)
	h, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: reg, Modules: []string{"test.prompt"}, Home: f.home, Workspace: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	f.host = h
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []streamhttp.Token
	for _, tk := range cfg.Auth.Tokens {
		tokens = append(tokens, streamhttp.Token{Name: tk.Name, SHA256: tk.SHA256, Profile: tk.Profile})
	}
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: cfg.ProfileNames(), Tokens: tokens, CheckHosts: true})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closeSessions(ctx)
		ts.Close()
	})
	f.url = ts.URL
	return f
}

func connect(t *testing.T, url, version string, headers map[string]string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	c, err := dial(t, url, version, headers, opts...)
	if err != nil {
		t.Fatalf("connect %s (%s): %v", url, version, err)
	}
	return c
}

func dial(t *testing.T, url, version string, headers map[string]string, opts ...client.ClientOption) (*client.Client, error) {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers))
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, append([]client.ClientOption{client.WithProtocolVersion(version)}, opts...)...)
	ctx := t.Context()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "bub-test", Version: "1.2.3"}
	if _, err := c.Initialize(ctx, req); err != nil {
		return nil, err
	}
	return c, nil
}

func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	sort.Strings(out)
	return out
}

func call(t *testing.T, c *client.Client, name string, args any) (*mcp.CallToolResult, error) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(t.Context(), req)
}

func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestBothProtocolEras(t *testing.T) {
	f := newFixture(t, false)
	all := []string{"admin_secret", "orders_get", "test_echo", "test_progress", "test_slow"}
	for _, version := range []string{legacy, mcp.ProtocolVersion20250618, mcp.ProtocolVersion20250326, modern} {
		t.Run(version, func(t *testing.T) {
			c := connect(t, f.url+"/mcp", version, nil)
			if got := c.ProtocolVersion(); got != version {
				t.Errorf("negotiated %q; want %q", got, version)
			}
			if diff := cmp.Diff(all, toolNames(t, c)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			res, err := call(t, c, "test_echo", map[string]any{"message": "hi"})
			if err != nil || res.IsError || text(res) != "Echo: hi" {
				t.Fatalf("test_echo = %+v, %v", res, err)
			}
			res, err = call(t, c, "orders_get", map[string]any{"order_id": "A1"})
			if err != nil || text(res) != "order A1: shipped" {
				t.Fatalf("orders_get = %+v, %v", res, err)
			}
			if diff := cmp.Diff(map[string]any{"id": "A1", "status": "shipped"}, res.StructuredContent); diff != "" {
				t.Errorf("structuredContent (-want +got):\n%s", diff)
			}
			res, err = call(t, c, "orders_get", map[string]any{"order_id": "missing"})
			if err != nil || !res.IsError || text(res) != "[not_found] order missing not found" {
				t.Errorf("tool error = %+v, %v; want isError with [kind] message", res, err)
			}
			res, err = call(t, c, "orders_get", map[string]any{"order_id": 7})
			if err != nil || !res.IsError || !strings.HasPrefix(text(res), "[invalid_input] Tool 'orders_get' argument validation failed.") {
				t.Errorf("validation error = %+v, %v", res, err)
			}
			if _, err := call(t, c, "admin_command", nil); err == nil {
				t.Error("command-only tool callable over MCP")
			}
			if _, err := call(t, c, "no_such_tool", nil); err == nil {
				t.Error("unknown tool: no protocol error")
			}
		})
	}
}

func TestToolDefinitions(t *testing.T) {
	f := newFixture(t, false)
	c := connect(t, f.url+"/mcp", legacy, nil)
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Annotations.DestructiveHint == nil || tl.Annotations.ReadOnlyHint == nil || tl.Annotations.OpenWorldHint == nil || tl.Annotations.IdempotentHint == nil {
			t.Errorf("%s: annotations not explicit: %+v", tl.Name, tl.Annotations)
		}
		if tl.Name == "orders_get" && tl.OutputSchema.Type != "object" && len(tl.RawOutputSchema) == 0 {
			t.Errorf("orders_get lacks its output schema")
		}
		if tl.Name == "test_echo" && (len(tl.RawOutputSchema) != 0 || tl.OutputSchema.Type != "") {
			t.Errorf("test_echo (string result) has an output schema")
		}
	}
}

func TestProfilesByPathAndInstructions(t *testing.T) {
	f := newFixture(t, false)
	c := connect(t, f.url+"/mcp/p/ro", legacy, nil)
	if diff := cmp.Diff([]string{"orders_get", "test_echo", "test_progress"}, toolNames(t, c)); diff != "" {
		t.Errorf("ro tools (-want +got):\n%s", diff)
	}
	for _, hidden := range []string{"admin_secret", "admin.secret", "test_slow"} {
		if res, err := call(t, c, hidden, nil); err == nil {
			t.Errorf("hidden tool %s callable: %+v", hidden, res)
		}
	}
	// Instructions come from the providers, per connection.
	tr, _ := transport.NewStreamableHTTP(f.url + "/mcp/p/ro")
	c2 := client.NewClient(tr, client.WithProtocolVersion(legacy))
	if err := c2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = legacy
	res, err := c2.Initialize(t.Context(), init)
	if err != nil {
		t.Fatal(err)
	}
	if res.Instructions != "Profile ro has 3 tools." {
		t.Errorf("instructions = %q", res.Instructions)
	}
	// An unknown profile is a 404, not the default profile.
	if _, err := dial(t, f.url+"/mcp/p/nope", legacy, nil); err == nil {
		t.Error("unknown profile accepted")
	}
}

func TestBearerTokens(t *testing.T) {
	f := newFixture(t, true)
	post := func(path, auth string) *http.Response {
		req, _ := http.NewRequest("POST", f.url+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// RFC 6750 §3.1: a refused token is invalid_token; a request with
	// no bearer token gets the challenge without an error code.
	tests := []struct {
		name, path, auth string
		want             int
		challenge        string
	}{
		{"no token", "/mcp", "", 401, `Bearer realm="bub-mcp"`},
		{"wrong token", "/mcp", "Bearer nope", 401, `Bearer realm="bub-mcp", error="invalid_token"`},
		{"wrong scheme", "/mcp", "Basic " + testToken, 401, `Bearer realm="bub-mcp"`},
		{"token for another profile", "/mcp/p/default", "Bearer " + testToken, 403, ""},
	}
	for _, tt := range tests {
		resp := post(tt.path, tt.auth)
		if resp.StatusCode != tt.want {
			t.Errorf("%s: status %d; want %d", tt.name, resp.StatusCode, tt.want)
		}
		if got := resp.Header.Get("WWW-Authenticate"); tt.want == 401 && got != tt.challenge {
			t.Errorf("%s: WWW-Authenticate = %q; want %q", tt.name, got, tt.challenge)
		}
	}
	// The token selects its profile, on /mcp and on its own path.
	for _, path := range []string{"/mcp", "/mcp/p/ro"} {
		c := connect(t, f.url+path, legacy, map[string]string{"Authorization": "Bearer " + testToken})
		if diff := cmp.Diff([]string{"orders_get", "test_echo", "test_progress"}, toolNames(t, c)); diff != "" {
			t.Errorf("%s tools (-want +got):\n%s", path, diff)
		}
	}
}

func TestHostAndOriginChecks(t *testing.T) {
	f := newFixture(t, false)
	tests := []struct {
		host, origin string
		want         int
	}{
		{"evil.example.com", "", 403},
		{"evil.example.com", "http://evil.example.com", 403},
		{"", "http://evil.example.com", 403},
		{"localhost:1234", "http://localhost:1234", 200},
		{"", "", 200},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest("POST", f.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tt.host != "" {
			req.Host = tt.host
		}
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %q Origin %q: status %d; want %d", tt.host, tt.origin, resp.StatusCode, tt.want)
		}
	}
	resp, err := http.Get(f.url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestProgressNotificationsNeverLost runs the progress tool 50 times on one
// session and requires every notification to reach the client before the
// result (mcp-go can otherwise lose them: see park.go).
func TestProgressNotificationsNeverLost(t *testing.T) {
	f := newFixture(t, false)
	for _, version := range []string{legacy, modern} {
		t.Run(version, func(t *testing.T) {
			c := connect(t, f.url+"/mcp", version, nil)
			var mu sync.Mutex
			got := map[string][]float64{}
			c.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method != "notifications/progress" {
					return
				}
				tok := fmt.Sprint(n.Params.AdditionalFields["progressToken"])
				p, _ := n.Params.AdditionalFields["progress"].(float64)
				mu.Lock()
				got[tok] = append(got[tok], p)
				mu.Unlock()
			})
			for i := range 50 {
				tok := fmt.Sprintf("tok-%d", i)
				req := mcp.CallToolRequest{}
				req.Params.Name = "test_progress"
				req.Params.Meta = &mcp.Meta{ProgressToken: tok}
				res, err := c.CallTool(t.Context(), req)
				if err != nil || text(res) != "done" {
					t.Fatalf("call %d: %+v %v", i, res, err)
				}
				mu.Lock()
				seen := append([]float64(nil), got[tok]...)
				mu.Unlock()
				if diff := cmp.Diff([]float64{1, 2, 3}, seen); diff != "" {
					t.Fatalf("call %d: progress before the result (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestCancellationReachesTheTool(t *testing.T) {
	f := newFixture(t, false)
	c := connect(t, f.url+"/mcp", legacy, nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "test_slow"
		_, err := c.CallTool(ctx, req)
		errc <- err
	}()
	select {
	case <-f.started:
	case <-time.After(10 * time.Second):
		t.Fatal("test_slow never started")
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("cancelled call returned no error")
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.cancels.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the tool's context was never cancelled")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAuditTrail(t *testing.T) {
	f := newFixture(t, true)
	c := connect(t, f.url+"/mcp", legacy, map[string]string{"Authorization": "Bearer " + testToken})
	if _, err := call(t, c, "test_echo", map[string]any{"message": "audited"}); err != nil {
		t.Fatal(err)
	}
	if err := f.host.Close(); err != nil { // flushes the group commit
		t.Fatal(err)
	}
	// The call is in the audit log, and the session tape holds nothing of it.
	if files, _ := filepath.Glob(filepath.Join(f.home, "tapes", "*.jsonl")); len(files) != 0 {
		t.Errorf("tapes = %v; want none (audit is not on the tape)", files)
	}
	b, err := os.ReadFile(filepath.Join(f.home, "audit", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	for _, ln := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatalf("audit line %q: %v", ln, err)
		}
		recs = append(recs, m)
	}
	if len(recs) != 1 {
		t.Fatalf("audit records = %v; want one", recs)
	}
	r := recs[0]
	want := map[string]any{"principal": "ci", "client": "bub-test/1.2.3", "transport": "http", "profile": "ro", "tool": "test_echo",
		"outcome": "ok", "args": map[string]any{"message": "audited"}}
	got := map[string]any{}
	for k := range want {
		got[k] = r[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit record (-want +got):\n%s", diff)
	}
}

func TestStatefulSessionsEnd(t *testing.T) {
	f := newFixture(t, false)
	c := connect(t, f.url+"/mcp", legacy, nil)
	id := c.GetSessionId()
	if id == "" {
		t.Fatal("no session id")
	}
	req, _ := http.NewRequest("DELETE", f.url+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest("POST", f.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`))
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("terminated session: status %d; want 404", resp.StatusCode)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:9": true, "0.0.0.0:80": false, ":8080": false, "10.0.0.1:80": false} {
		if got := streamhttp.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v; want %v", addr, got, want)
		}
	}
}
