package upstream_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/proctest"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// directClient talks to an npm server itself, as bub-mcp does, for
// comparison.
func directClient(t testing.TB, command string, args []string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	c, err := client.NewStdioMCPClientWithOptions(command, nil, args)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, o := range opts {
		o(c)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	return c
}

// wire is a tool definition or result as JSON, the form clients see.
func wire(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// namespacedURIs is a tool result as bub-mcp passes it on: the same, but
// for the URIs of its resource links and embedded resources, which name
// the resources as bub-mcp serves them (scheme://<server>/<rest>).
func namespacedURIs(server string, result map[string]any) map[string]any {
	ns := func(m map[string]any) {
		if uri, ok := m["uri"].(string); ok {
			if scheme, rest, ok := strings.Cut(uri, "://"); ok {
				m["uri"] = scheme + "://" + server + "/" + rest
			}
		}
	}
	parts, _ := result["content"].([]any)
	for _, p := range parts {
		part, _ := p.(map[string]any)
		switch part["type"] {
		case "resource_link":
			ns(part)
		case "resource":
			if r, ok := part["resource"].(map[string]any); ok {
				ns(r)
			}
		}
	}
	return result
}

// A wav file's first bytes: enough for server-filesystem to call it audio.
var wav = []byte("RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00\x02\x00\x10\x00data\x00\x00\x00\x00")

// Tools of server-everything and server-filesystem, listed and called
// through bub-mcp over MCP, look and answer exactly as they do when the
// same client asks the servers directly: descriptions, schemas and hints
// unchanged, every content kind, structuredContent and isError mapped back.
func TestToolsThroughMCPMatchDirect(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tone.wav"), wav, 0o600); err != nil {
		t.Fatal(err)
	}
	dir, _ = filepath.EvalSymlinks(dir)
	evCmd, evArgs := npmServer(t, "server-everything", "stdio")
	fsCmd, fsArgs := npmServer(t, "server-filesystem", dir)
	h := newHost(t, stdioTable("everything", evCmd, evArgs, "")+stdioTable("files", fsCmd, fsArgs, ""), "")
	via, _ := h.serve(t)
	direct := map[string]*client.Client{"everything": directClient(t, evCmd, evArgs), "files": directClient(t, fsCmd, fsArgs)}

	listed, err := via.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, tool := range listed.Tools {
		got[tool.Name] = wire(t, tool)
	}
	for server, c := range direct {
		res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			want := wire(t, tool)
			name := server + "_" + tool.Name
			want["name"] = name
			if diff := cmp.Diff(want, got[name]); diff != "" {
				t.Errorf("tools/list %s differs from the upstream's (-upstream +bub-mcp):\n%s", name, diff)
			}
		}
	}

	calls := []struct {
		server, tool string
		args         map[string]any
	}{
		{"everything", "echo", map[string]any{"message": "hi"}},
		{"everything", "get-sum", map[string]any{"a": 2, "b": 3}},
		{"everything", "get-tiny-image", map[string]any{}},
		{"everything", "get-annotated-message", map[string]any{"messageType": "error", "includeImage": true}},
		{"everything", "get-resource-links", map[string]any{"count": 2}},
		{"everything", "get-resource-reference", map[string]any{"resourceType": "Blob", "resourceId": 2}},
		{"everything", "get-structured-content", map[string]any{"location": "Chicago"}},
		{"files", "read_media_file", map[string]any{"path": filepath.Join(dir, "tone.wav")}},
		{"files", "list_directory", map[string]any{"path": dir}},
	}
	for _, tc := range calls {
		t.Run(tc.server+"."+tc.tool, func(t *testing.T) {
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = tc.tool, tc.args
			want, err := direct[tc.server].CallTool(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			req.Params.Name = tc.server + "_" + tc.tool
			got, err := via.CallTool(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(namespacedURIs(tc.server, wire(t, want)), wire(t, got)); diff != "" {
				t.Errorf("result differs from the upstream's (-upstream +bub-mcp):\n%s", diff)
			}
		})
	}

	t.Run("isError", func(t *testing.T) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "read_text_file", map[string]any{"path": "/etc/hostname"}
		want, err := direct["files"].CallTool(t.Context(), req)
		if err != nil || !want.IsError {
			t.Fatalf("direct call: %+v, %v; want an isError result", want, err)
		}
		req.Params.Name = "files_read_text_file"
		got, err := via.CallTool(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wire(t, want), wire(t, got)); diff != "" {
			t.Errorf("isError result differs from the upstream's (-upstream +bub-mcp):\n%s", diff)
		}
	})
}

// tools and deny select an upstream's tools by glob (case-sensitive, deny
// wins), and profiles scope them like any tool.
func TestToolGlobsAndProfiles(t *testing.T) {
	src := everything(t, `tools = ["everything.get-*", "echo", "ECHO*", "everything_trigger-long*"]
deny = ["*sum*"]`) + `
[profiles.small]
tools = ["everything.*"]
deny = ["everything_echo"]
`
	h := newHost(t, src, "")
	names := h.Registry().Names()
	want := []string{"everything.echo", "everything.get-annotated-message", "everything.get-env", "everything.get-resource-links",
		"everything.get-resource-reference", "everything.get-structured-content", "everything.get-tiny-image", "everything.trigger-long-running-operation"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("registered (-want +got):\n%s", diff)
	}
	h.conn.Profile = "small"
	if err := h.Resolve(t.Context(), h.conn); err != nil {
		t.Fatal(err)
	}
	v, err := h.View(t.Context(), h.conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Lookup("everything_echo"); ok {
		t.Error("profile deny did not hide everything_echo")
	}
	if res := h.call(t.Context(), "everything.echo", map[string]any{"message": "x"}); res.Err == nil || res.Err.Kind != registry.KindNotFound {
		t.Errorf("denied tool called: %+v", res)
	}
	if res := h.call(t.Context(), "everything_get-tiny-image", map[string]any{}); res.Err != nil {
		t.Errorf("allowed tool failed: %v", res.Err)
	}
}

// testServer is an mcp-go server over streamable HTTP, for behaviour the
// npm servers do not show on demand (tool list changes, clashing names).
func testServer(t testing.TB, tools ...string) (*server.MCPServer, string) {
	t.Helper()
	s := server.NewMCPServer("test-upstream", "1", server.WithToolCapabilities(true))
	for _, name := range tools {
		addEcho(s, name)
	}
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStateful(true)))
	t.Cleanup(ts.Close)
	return s, ts.URL + "/mcp"
}

func addEcho(s *server.MCPServer, name string) {
	s.AddTool(mcp.NewTool(name, mcp.WithDescription("Echo "+name), mcp.WithString("text")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(name + ": " + req.GetString("text", "")), nil
	})
}

// An upstream's notifications/tools/list_changed brings its new tools into
// the registry, the Views and our clients' tools/list, and tells them.
func TestListChanged(t *testing.T) {
	up, url := testServer(t, "one")
	h := newHost(t, "[upstreams.web]\nurl = \""+url+"\"\n", "")
	changed := make(chan struct{}, 16)
	via, _ := h.serve(t)
	via.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	addEcho(up, "two")
	// Between requests, our notifications wait for the client's next
	// POST (its GET stream is parked, see mcpserver/park.go): poll.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := via.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if len(names) == 2 {
			if diff := cmp.Diff([]string{"web_one", "web_two"}, names); diff != "" {
				t.Fatalf("tools/list (-want +got):\n%s", diff)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools/list still %v", names)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := via.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil { // carries what is still queued
		t.Fatal(err)
	}
	if len(changed) == 0 {
		t.Error("no notifications/tools/list_changed reached the client")
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "web_two", map[string]any{"text": "hi"}
	res, err := via.CallTool(t.Context(), req)
	if err != nil || res.Content[0].(mcp.TextContent).Text != "two: hi" {
		t.Fatalf("call of the new tool: %+v, %v", res, err)
	}
}

// Two upstream tools whose names sanitise alike are a load error naming
// both; none of that server's tools is registered.
func TestNameClash(t *testing.T) {
	_, url := testServer(t, "a.b", "a_b", "c")
	h := newHost(t, "[upstreams.web]\nurl = \""+url+"\"\n", "")
	s := h.status(t, "web")
	if s.State != "error" || !strings.Contains(s.LastError, `"a.b"`) || !strings.Contains(s.LastError, `"a_b"`) {
		t.Fatalf("status %+v; want error naming both tools", s)
	}
	if n := len(h.Registry().Names()); n != 0 {
		t.Errorf("%d tools registered; want none", n)
	}
}

// The server's whole process group ends when the App closes: a child the
// server started dies with it.
func TestCloseEndsProcessTree(t *testing.T) {
	cmd, args := npmServer(t, "server-everything", "stdio")
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	script := `sleep 300 & echo $! > "$0"; exec "$@"`
	h := newHost(t, stdioTable("everything", "sh", append([]string{"-c", script, pidFile, cmd}, args...), ""), "")
	leader := h.status(t, "everything").PID
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	if _, err := fmtSscan(string(b), &child); err != nil {
		t.Fatal(err)
	}
	if leader == 0 || proctest.Gone(child) {
		t.Fatalf("leader %d, child %d: want both running", leader, child)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitGone(t, 10*time.Second, leader, child)
	if s := h.status(t, "everything"); s.State != "closed" {
		t.Errorf("state %s after Close; want closed", s.State)
	}
}

// progressPeer records what a call reports.
type progressPeer struct {
	mu       sync.Mutex
	progress []float64
	first    chan struct{}
	once     sync.Once
}

func newProgressPeer() *progressPeer { return &progressPeer{first: make(chan struct{})} }

func (p *progressPeer) Progress(ctx context.Context, progress, total float64, message string) {
	p.mu.Lock()
	p.progress = append(p.progress, progress)
	p.mu.Unlock()
	p.once.Do(func() { close(p.first) })
}
func (p *progressPeer) Log(context.Context, slog.Level, string, any) {}
func (p *progressPeer) Sample(context.Context, registry.SampleRequest) (*registry.SampleResult, error) {
	return nil, registry.ErrNoPeer
}
func (p *progressPeer) Elicit(context.Context, registry.ElicitRequest) (*registry.ElicitResult, error) {
	return nil, registry.ErrNoPeer
}

// A call in flight when its upstream dies gets a clear tool error; the
// upstream is restarted with backoff and the next call works.
func TestKilledUpstreamRecovers(t *testing.T) {
	h := newHost(t, everything(t, ""), "")
	first := h.status(t, "everything")
	peer := newProgressPeer()
	done := make(chan registry.Result, 1)
	go func() {
		done <- h.callWith(t.Context(), "everything.trigger-long-running-operation", map[string]any{"duration": 60, "steps": 120}, peer)
	}()
	select {
	case <-peer.first: // the call is running upstream
	case <-time.After(30 * time.Second):
		t.Fatal("no progress from the long-running call")
	}
	if err := syscall.Kill(-first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Err == nil || res.Err.Kind != registry.KindTemporary || !strings.Contains(res.Err.Message, "went away") || !strings.Contains(res.Err.Message, "signal: killed") {
		t.Fatalf("in-flight call: %+v; want a temporary error saying the upstream went away", res.Err)
	}
	s := h.waitState(t, "everything", "ready", func(s upstream.Status) bool { return s.Restarts == 1 })
	if s.PID == first.PID || s.PID == 0 {
		t.Errorf("pid %d after restart (was %d)", s.PID, first.PID)
	}
	if res := h.call(t.Context(), "everything.echo", map[string]any{"message": "back"}); res.Err != nil || res.Text != "Echo: back" {
		t.Fatalf("call after restart: %q, %v", res.Text, res.Err)
	}
	proctest.WaitGone(t, 10*time.Second, first.PID)
}

// Progress of an upstream call reaches the calling MCP client; the
// upstream's elicitation and sampling requests reach it too, and their
// answers go back.
func TestPassThroughToClient(t *testing.T) {
	h := newHost(t, everything(t, ""), "")
	h.waitTool(t, "everything.trigger-elicitation-request")
	h.waitTool(t, "everything.trigger-sampling-request")
	var elicited, sampled string
	via, _ := h.serve(t,
		client.WithElicitationHandler(elicitFunc(func(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			elicited = req.Params.Message
			r := &mcp.ElicitationResult{}
			r.Action, r.Content = mcp.ElicitationResponseActionAccept, map[string]any{"name": "Ada Lovelace"}
			return r, nil
		})),
		client.WithSamplingHandler(sampleFunc(func(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampled = req.Messages[0].Content.(mcp.TextContent).Text
			r := &mcp.CreateMessageResult{Model: "test-model", StopReason: "endTurn"}
			r.Role, r.Content = mcp.RoleAssistant, mcp.NewTextContent("forty-two")
			return r, nil
		})))

	var mu sync.Mutex
	var progress []float64
	via.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			mu.Lock()
			progress = append(progress, n.Params.AdditionalFields["progress"].(float64))
			mu.Unlock()
		}
	})
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "everything_trigger-long-running-operation", map[string]any{"duration": 0.3, "steps": 3}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok"}
	if _, err := via.CallTool(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if diff := cmp.Diff([]float64{1, 2, 3}, progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	mu.Unlock()

	req = mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "everything_trigger-elicitation-request", map[string]any{}
	res, err := via.CallTool(t.Context(), req)
	if err != nil || res.IsError || elicited == "" || !strings.Contains(allText(res), "Ada Lovelace") {
		t.Fatalf("elicitation: %q (asked %q), %v", allText(res), elicited, err)
	}
	req.Params.Name, req.Params.Arguments = "everything_trigger-sampling-request", map[string]any{"prompt": "the answer?"}
	res, err = via.CallTool(t.Context(), req)
	if err != nil || res.IsError || !strings.Contains(sampled, "the answer?") || !strings.Contains(allText(res), "forty-two") {
		t.Fatalf("sampling: %q (asked %q), %v", allText(res), sampled, err)
	}
}

func allText(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

type elicitFunc func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)

func (f elicitFunc) Elicit(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(ctx, r)
}

type sampleFunc func(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)

func (f sampleFunc) CreateMessage(ctx context.Context, r mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return f(ctx, r)
}

// A call past the server's timeout fails with an error naming the key.
func TestCallTimeout(t *testing.T) {
	h := newHost(t, everything(t, `timeout = "300ms"`), "")
	res := h.call(t.Context(), "everything.trigger-long-running-operation", map[string]any{"duration": 30, "steps": 30})
	if res.Err == nil || !strings.Contains(res.Err.Message, "upstreams.everything.timeout") {
		t.Fatalf("got %+v; want a timeout error naming the key", res.Err)
	}
	if res := h.call(t.Context(), "everything.echo", map[string]any{"message": "still"}); res.Err != nil {
		t.Fatalf("next call: %v", res.Err)
	}
}

// The streamable HTTP transport: server-everything serving HTTP.
func TestStreamableHTTPUpstream(t *testing.T) {
	cmd, args := npmServer(t, "server-everything", "streamableHttp")
	port := freePort(t)
	execServer(t, cmd, args, "PORT="+itoa(port))
	url := "http://127.0.0.1:" + itoa(port) + "/mcp"
	waitHTTP(t, url)
	h := newHost(t, "[upstreams.everything]\nurl = \""+url+"\"\nheaders = {X-Test = \"1\"}\n", "")
	if res := h.call(t.Context(), "everything.get-sum", map[string]any{"a": 20, "b": 22}); res.Err != nil || !strings.Contains(res.Text, "42") {
		t.Fatalf("get-sum over HTTP: %q, %v", res.Text, res.Err)
	}
	peer := newProgressPeer()
	res := h.callWith(t.Context(), "everything.trigger-long-running-operation", map[string]any{"duration": 0.2, "steps": 2}, peer)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if diff := cmp.Diff([]float64{1, 2}, peer.progress); diff != "" {
		t.Errorf("progress over HTTP (-want +got):\n%s", diff)
	}
}

func waitHTTP(t testing.TB, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
