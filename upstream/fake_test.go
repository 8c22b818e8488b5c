package upstream_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/bubbuild/bub-mcp/builtin" // fs.read, a builtin beside the upstreams
	"github.com/bubbuild/bub-mcp/internal/testbin"
	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// fakeBinary is the built upstream/internal/fakeupstream, a stdio server
// that misbehaves on demand.
func fakeBinary(t testing.TB) string {
	return testbin.Build(t, "github.com/bubbuild/bub-mcp/upstream/internal/fakeupstream")
}

// fakeTable mounts fakeupstream as [upstreams.<name>] with its flags.
func fakeTable(t testing.TB, name string, extra string, flags ...string) string {
	return stdioTable(name, fakeBinary(t), flags, extra)
}

// text is a direct call's text, failing the test on a tool error.
func (h *host) text(t testing.TB, tool string, args any) string {
	t.Helper()
	res := h.call(t.Context(), tool, args)
	if res.Err != nil {
		t.Fatalf("%s: %v", tool, res.Err)
	}
	return res.Text
}

// A burst of notifications/tools/list_changed is one refresh in flight
// and at most one pending, not a tools/list per notification; the list
// registered in the end is the latest.
func TestListChangedBurstIsCoalesced(t *testing.T) {
	const n = 2000
	h := newHost(t, fakeTable(t, "fake", ""), "")
	h.waitState(t, "fake", upstream.StateReady, nil)
	if got := h.text(t, "fake.burst", map[string]any{"n": n}); got != "generation "+strconv.Itoa(n) {
		t.Fatalf("burst: %q", got)
	}
	h.waitTool(t, "fake.gen_"+strconv.Itoa(n))
	time.Sleep(200 * time.Millisecond) // a pending refresh, if any, has run
	lists, err := strconv.Atoi(h.text(t, "fake.lists", map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	// The first list, then a few: each refresh reads the list once, and
	// the notifications that arrive while it runs make one more (without
	// coalescing: one per notification).
	if lists > 8 {
		t.Errorf("%d notifications made %d tools/list requests; want at most 8", n, lists)
	}
	var gens []string
	for _, tool := range h.Registry().Tools() {
		if strings.HasPrefix(tool.Name, "fake.gen_") {
			gens = append(gens, tool.Name)
		}
	}
	if diff := cmp.Diff([]string{"fake.gen_" + strconv.Itoa(n)}, gens); diff != "" {
		t.Errorf("registered generation (-want +got):\n%s", diff)
	}
}

// An upstream's sampling/createMessage and elicitation/create during a
// call are refused to the upstream with an error when our client declared
// neither capability; our client is asked nothing.
func TestServerRequestsNeedTheClientsCapability(t *testing.T) {
	h := newHost(t, fakeTable(t, "fake", ""), "")
	h.waitState(t, "fake", upstream.StateReady, nil)
	_, base := h.serve(t)
	//lint:ignore SA1019 the 2025 session protocol on purpose: it carries server-to-client requests
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125)) // no sampling, no elicitation
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	asked := make(chan string, 4)
	tr.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		asked <- req.Method
		return nil, errors.New("not declared")
	})
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tool, capability string }{
		{"fake_sample", "sampling"},
		{"fake_elicit", "elicitation"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			req := mcp.CallToolRequest{}
			req.Params.Name = tc.tool
			res, err := c.CallTool(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := allText(res)
			if !strings.HasPrefix(got, "error ") || !strings.Contains(got, "did not declare the "+tc.capability+" capability") {
				t.Errorf("the upstream got %q; want a JSON-RPC error naming the %s capability", got, tc.capability)
			}
		})
	}
	select {
	case m := <-asked:
		t.Errorf("our client was sent %s", m)
	default:
	}
}

// Start-up does not wait for upstreams: with an upstream that answers
// initialize only once the test opens its gate, the App is built, the
// upstream is still starting with its remembered tools, a builtin call
// returns while it is still starting (so the call did not wait for it),
// and a call of its tool, once the gate opens, waits for it and succeeds.
// Without the change, building the App waits for the start, which times
// out (start_timeout) and leaves the upstream in backoff.
func TestStartDoesNotWaitForUpstreams(t *testing.T) {
	home := t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate")
	table := fakeTable(t, "slow", "", "-init-gate", gate)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	first := newHost(t, table, home)
	first.waitState(t, "slow", upstream.StateReady, nil) // its tool list is remembered
	first.Close()
	if err := os.WriteFile(filepath.Join(home, "workspace", "note.txt"), []byte("a note\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}

	noWait = true
	h := newHost(t, table, home, "builtin")
	noWait = false
	if st := h.status(t, "slow"); st.State != upstream.StateStarting || st.Tools == 0 {
		t.Errorf("slow upstream right after start-up: %+v; want starting with its remembered tools", st)
	}
	if got := h.text(t, "fs.read", map[string]any{"path": "note.txt"}); !strings.Contains(got, "a note") {
		t.Errorf("fs.read: %q", got)
	}
	if st := h.status(t, "slow"); st.State != upstream.StateStarting {
		t.Errorf("slow upstream after a builtin call: %s; want still starting (the call must not wait for it)", st.State)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := h.text(t, "slow.big", map[string]any{"bytes": 3}); got != "xxx" {
		t.Errorf("slow.big: %q", got)
	}
	if st := h.status(t, "slow"); st.State != upstream.StateReady {
		t.Errorf("after the call: %+v", st)
	}
}

// A one-shot command (app.Options.OnDemand, as bub-mcp call builds its App)
// spawns no upstream at start-up, remembered list or not: a builtin call
// leaves them idle, and the first call of an upstream's tool starts it.
func TestOnDemandStartsOnFirstCall(t *testing.T) {
	home := t.TempDir()
	first := newHost(t, fakeTable(t, "seen", "")+fakeTable(t, "later", ""), home)
	first.waitState(t, "seen", upstream.StateReady, nil) // its tool list is remembered
	first.Close()
	if err := os.Remove(filepath.Join(home, "upstreams", "later.json")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err) // "later" has no remembered list: the eager case
	}
	if err := os.WriteFile(filepath.Join(home, "workspace", "note.txt"), []byte("a note\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	onDemand = true
	h := newHost(t, fakeTable(t, "seen", "")+fakeTable(t, "later", ""), home, "builtin")
	onDemand = false
	if got := h.text(t, "fs.read", map[string]any{"path": "note.txt"}); !strings.Contains(got, "a note") {
		t.Errorf("fs.read: %q", got)
	}
	for _, name := range []string{"seen", "later"} {
		if st := h.status(t, name); st.State != upstream.StateIdle {
			t.Errorf("%s after a builtin call: %s; want idle (not spawned)", name, st.State)
		}
	}
	if got := h.text(t, "seen.big", map[string]any{"bytes": 3}); got != "xxx" {
		t.Errorf("seen.big: %q", got)
	}
	if st := h.status(t, "seen"); st.State != upstream.StateReady {
		t.Errorf("seen after its call: %s; want ready", st.State)
	}
}

// A Cline-style mcp.json with other clients' fields, a disabled server,
// ${VAR} in args and headers, and a "type": "sse" server (mcp-go's own SSE
// server) is mounted instead of refused.
func TestMCPJSONOfRealClients(t *testing.T) {
	home := t.TempDir()
	sse := server.NewMCPServer("sse-upstream", "1")
	sse.AddTool(mcp.NewTool("whoami", mcp.WithDescription("the Authorization header")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(req.Header.Get("Authorization")), nil
	})
	ts := httptest.NewServer(server.NewSSEServer(sse))
	t.Cleanup(ts.Close)
	t.Setenv("BUB_TEST_SSE_TOKEN", "tok-123")
	t.Setenv("BUB_TEST_FAKE", fakeBinary(t))
	doc := `{"mcpServers": {
		"fake": {"command": "${BUB_TEST_FAKE}", "args": [], "autoApprove": ["big"], "disabled": false, "timeout": 60},
		"off": {"command": "/nonexistent/off", "disabled": true},
		"old": {"type": "sse", "url": "` + ts.URL + `/sse", "headers": {"Authorization": "Bearer ${env:BUB_TEST_SSE_TOKEN}"}, "trust": true}
	}}`
	if err := os.WriteFile(filepath.Join(home, "mcp.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, "", home)
	var names []string
	m, _ := upstream.FromApp(h.App)
	for _, s := range m.Status() {
		names = append(names, s.Name+"/"+s.Transport)
	}
	if diff := cmp.Diff([]string{"fake/stdio", "old/sse"}, names); diff != "" {
		t.Errorf("mounted (-want +got):\n%s", diff)
	}
	h.waitState(t, "old", upstream.StateReady, nil)
	if got := h.text(t, "old.whoami", map[string]any{}); got != "Bearer tok-123" {
		t.Errorf("old.whoami over SSE: %q", got)
	}
	h.waitState(t, "fake", upstream.StateReady, nil)
	if got := h.text(t, "fake.big", map[string]any{"bytes": 2}); got != "xx" {
		t.Errorf("fake.big: %q", got)
	}
}

// TestWaitSeesTheFirstTrysOutcome: Wait (what `bub-mcp upstreams` and
// tests use) returns once the first attempt is over, and the status then
// says how it ended. An upstream that never answers initialize was still
// shown "starting" with no error: the first try was announced before its
// failure was recorded.
func TestWaitSeesTheFirstTrysOutcome(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "never") // never created: initialize never answered
	h := newHost(t, fakeTable(t, "mute", `start_timeout = "300ms"`, "-init-gate", gate), "")
	st := h.status(t, "mute")
	if st.State != upstream.StateBackoff || !strings.Contains(st.LastError, "initialize") {
		t.Errorf("after Wait: state %s, last error %q; want backoff with the initialize timeout", st.State, st.LastError)
	}
}
