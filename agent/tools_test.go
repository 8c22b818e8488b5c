package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/internal/fakemodel"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestSubagent(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []call{{ID: "s1", Name: "subagent", Arguments: `{"prompt":"sub task","allowed_tools":["fs_read"]}`}}},
		fakemodel.Reply{Text: "sub answer"},
		fakemodel.Reply{Text: "parent done"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	res, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "delegate"})
	if err != nil || res.Text != "parent done" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	reqs := srv.Requests()
	if diff := cmp.Diff([]msg{{Role: "system", Content: f.system()}, {Role: "user", Content: "sub task"}}, fakemodel.OpenAIMessages(reqs[1])); diff != "" {
		t.Errorf("subagent messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"fs_read"}, fakemodel.ToolNames(reqs[1])); diff != "" {
		t.Errorf("subagent tools (-want +got):\n%s", diff)
	}
	parent := fakemodel.OpenAIMessages(reqs[2])
	if parent[3].Content != "sub answer" {
		t.Errorf("subagent result = %q", parent[3].Content)
	}
	// The temp session left nothing on disk: only the parent's tape.
	files, _ := filepath.Glob(filepath.Join(f.home, "tapes", "*.jsonl"))
	if len(files) != 1 {
		t.Errorf("tape files = %v; want only the parent's", files)
	}
}

func TestSubagentUnknownTool(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []call{{Name: "subagent", Arguments: `{"prompt":"x","allowed_tools":["fs_read","nope"]}`}}},
		fakemodel.Reply{Text: "ok"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL})
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "delegate"}); err != nil {
		t.Fatal(err)
	}
	got := fakemodel.OpenAIMessages(srv.Requests()[1])[3].Content
	if !strings.Contains(got, `"unknown tool name(s): 'nope'"`) {
		t.Errorf("result = %s", got)
	}
}

// TestAgentRunOverMCP runs agent_run through mcpserver with the mcp-go
// client, for a profile with agent = true, and checks that other profiles
// do not see it.
func TestAgentRunOverMCP(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []call{{Name: "fs_write", Arguments: `{"path":"mcp.txt","content":"from mcp"}`}}},
		fakemodel.Reply{Text: "Wrote mcp.txt."},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL, profileTOML: "[profiles.default]\nagent = true\nsessions = [\"mcp:*\"]\n[profiles.plain]\n"})
	ts := serveMCP(t, f)

	for _, version := range []string{mcp.ProtocolVersion20251125, mcp.LATEST_PROTOCOL_VERSION} {
		t.Run(version, func(t *testing.T) {
			plain := dialMCP(t, ts.URL+"/mcp/p/plain", version)
			if names := listTools(t, plain); contains(names, "agent_run") || contains(names, "subagent") {
				t.Errorf("profile plain sees %v", names)
			}
		})
	}

	c := dialMCP(t, ts.URL+"/mcp", mcp.ProtocolVersion20251125)
	names := listTools(t, c)
	if !contains(names, "agent_run") || !contains(names, "subagent") {
		t.Fatalf("profile default sees %v; want agent_run and subagent", names)
	}
	var mu sync.Mutex
	var progress []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			progress = append(progress, fmt.Sprint(n.Params.AdditionalFields["message"]))
			mu.Unlock()
		}
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "agent_run"
	req.Params.Arguments = map[string]any{"prompt": "write mcp.txt", "session_id": "mcp:agent-test"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("agent_run failed: %+v", res.Content)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "Wrote mcp.txt." {
		t.Errorf("content = %+v", res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var got agent.Result
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := agent.Result{Text: "Wrote mcp.txt.", Steps: 2, Model: "openai:fake-model", SessionID: "mcp:agent-test",
		ToolCalls: []agent.CallRecord{{Name: "fs_write", Arguments: `{"path":"mcp.txt","content":"from mcp"}`, Status: "ok"}}}
	want.Usage.PromptTokens, want.Usage.CompletionTokens, want.Usage.TotalTokens = 20, 10, 30
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("structured result (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(f.path("mcp.txt")); string(b) != "from mcp" {
		t.Errorf("mcp.txt = %q", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"step 1", "step 1: calling fs_write", "step 2", "done"}, progress); diff != "" {
		t.Errorf("progress messages (-want +got):\n%s", diff)
	}
}

// TestSessionScope checks that agent_run and subagent refuse session ids
// outside the caller's profile's sessions, before anything is written.
func TestSessionScope(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []call{
			{ID: "s1", Name: "subagent", Arguments: `{"prompt":"x","session":"mcp:other"}`},
		}},
		fakemodel.Reply{Calls: []call{{ID: "s2", Name: "subagent", Arguments: `{"prompt":"y","session":"test:session/notes"}`}}},
		fakemodel.Reply{Text: "derived answer"},
		fakemodel.Reply{Text: "parent done"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL, profileTOML: "[profiles.default]\nagent = true\n"})
	ts := serveMCP(t, f)
	c := dialMCP(t, ts.URL+"/mcp", mcp.LATEST_PROTOCOL_VERSION)

	tests := []struct{ session, wantErr string }{
		{"mcp:other", `session "mcp:other" is outside what profile "default" may use: "mcp:default" and "mcp:default/*" (the default); widen [profiles.default] sessions to allow it.`},
		{"temp/0000", `session "temp/0000" is outside`},
	}
	for _, tt := range tests {
		req := mcp.CallToolRequest{}
		req.Params.Name = "agent_run"
		req.Params.Arguments = map[string]any{"prompt": "p", "session_id": tt.session}
		res, err := c.CallTool(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(mcp.TextContent); ok {
				text = tc.Text
			}
		}
		if !res.IsError || !strings.Contains(text, tt.wantErr) {
			t.Errorf("agent_run session_id=%s = %v %q; want an error containing %q", tt.session, res.IsError, text, tt.wantErr)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("refused agent_run calls reached the model %d times", n)
	}

	// In a turn: a subagent on another session is refused, one on a
	// session derived from the caller's runs.
	res, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "delegate"})
	if err != nil || res.Text != "parent done" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	reqs := srv.Requests()
	if got := fakemodel.OpenAIMessages(reqs[1])[3].Content; !strings.Contains(got, `outside what profile`) {
		t.Errorf("subagent on mcp:other returned %s", got)
	}
	if got := fmt.Sprint(fakemodel.OpenAIMessages(reqs[3])); !strings.Contains(got, "derived answer") {
		t.Errorf("subagent on test:session/notes: parent's next request %s", got)
	}
	files, _ := filepath.Glob(filepath.Join(f.home, "tapes", "*.jsonl"))
	if len(files) != 2 {
		t.Errorf("tapes = %v; want the caller's and test:session/notes's, none for mcp:other", files)
	}
}

func TestAgentRunCancelled(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t, fakemodel.Reply{Delay: 20 * time.Second}))
	f := newFixture(t, fixtureOpts{url: srv.URL, profileTOML: "[profiles.default]\nagent = true\n"})
	ts := serveMCP(t, f)
	c := dialMCP(t, ts.URL+"/mcp", mcp.ProtocolVersion20251125)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "agent_run"
	req.Params.Arguments = map[string]any{"prompt": "hang"}
	start := time.Now()
	if _, err := c.CallTool(ctx, req); err == nil {
		t.Fatal("agent_run returned although the client gave up")
	}
	// The server's turn ends too: its model request is abandoned.
	conn := &providers.Connection{Profile: "default"}
	if err := f.app.Resolve(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	sess, err := f.app.Session(conn)
	if err != nil {
		t.Fatal(err)
	}
	for {
		stopped := false
		for _, e := range sess.Tape().Entries() {
			if e.Kind == "event" && e.Payload["name"] == "loop.step" {
				stopped = true
			}
		}
		if stopped {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the turn did not stop within 5s of the cancellation")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveMCP serves f's App over streamable HTTP, profile "default" at
// /mcp, until the test ends.
func serveMCP(t *testing.T, f *fixture) *httptest.Server {
	t.Helper()
	s, err := mcpserver.New(&mcpserver.Options{Backend: f.app, Registry: f.app.Registry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	handler := streamhttp.New(s, streamhttp.Options{DefaultProfile: "default", Profiles: f.cfg.ProfileNames()})
	closeSessions := handler.CloseSessions
	ts := httptest.NewServer(handler)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closeSessions(ctx)
		ts.Close()
	})
	return ts
}

func dialMCP(t *testing.T, url, version string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(version))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "agent-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	return c
}

func listTools(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
