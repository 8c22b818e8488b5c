package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// inputServer serves test.ask (asks a name, then a colour, one round each)
// and test.needs (requires sampling); runs counts test.ask's runs.
func inputServer(t *testing.T, runs *atomic.Int32) *mcpserver.Server {
	t.Helper()
	reg := registry.New()
	schema := json.RawMessage(`{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}`)
	reg.MustRegister(registry.MustNewTool("test.ask", "Ask twice.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Greeting string `json:"greeting"`
	}) (string, error) {
		runs.Add(1)
		name, err := tc.Elicit(ctx, registry.ElicitRequest{Key: "name", Message: "Name?", Schema: schema})
		if err != nil {
			return "", err
		}
		color, err := tc.Elicit(ctx, registry.ElicitRequest{Message: "Colour?", Schema: schema})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %v likes %v", in.Greeting, name.Content["v"], color.Content["v"]), nil
	}))
	reg.MustRegister(registry.MustNewTool("test.ask2", "Ask once.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		res, err := tc.Elicit(ctx, registry.ElicitRequest{Key: "name", Message: "Name?", Schema: schema})
		if err != nil {
			return "", err
		}
		return fmt.Sprint(res.Content["v"]), nil
	}))
	needs := registry.MustNewTool("test.needs", "Needs sampling.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		res, err := tc.Sample(ctx, registry.SampleRequest{Messages: []registry.SampleMessage{{Role: "user", Text: "hi"}}})
		if err != nil {
			return "", err
		}
		return res.Text, nil
	})
	needs.Requires = []string{"sampling"}
	reg.MustRegister(needs)
	return newServer(t, newHost(t, reg, ""))
}

// modernCall is a 2026-07-28 tools/call line with the given capabilities
// and extra params (inputResponses, requestState).
func modernCall(id int, tool, args, caps, extra string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":%s}}}`, id, tool, args, extra, caps)
}

func answer(v string) string { return fmt.Sprintf(`{"action":"accept","content":{"v":%q}}`, v) }

// exchange sends one line and returns the HTTP status (0 on stdio) and the
// JSON-RPC response.
type exchange func(t *testing.T, tool, line string) (int, map[string]any)

func httpExchange(t *testing.T, srv *mcpserver.Server) exchange {
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	return func(t *testing.T, tool, line string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(line))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body := string(b)
		if i := strings.LastIndex(body, "data: "); strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && i >= 0 {
			body = body[i+len("data: "):]
		}
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(strings.TrimSpace(body)))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("HTTP %d %q: %v", resp.StatusCode, b, err)
		}
		return resp.StatusCode, m
	}
}

func stdioExchange(t *testing.T, srv *mcpserver.Server) exchange {
	p := startStdio(t, srv)
	return func(t *testing.T, _, line string) (int, map[string]any) {
		t.Helper()
		p.send(line)
		return 0, p.recv()
	}
}

// TestInputRequiredRoundTrips drives a two-question tool through three
// rounds on both transports of the 2026-07-28 wire, and checks what must
// be refused: tampered, moved and re-targeted requestState, and a tool
// whose required capability the request lacks.
func TestInputRequiredRoundTrips(t *testing.T) {
	all := `{"elicitation":{},"sampling":{}}`
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			var runs atomic.Int32
			srv := inputServer(t, &runs)
			do := httpExchange
			if transport == "stdio" {
				do = stdioExchange
			}
			ex := do(t, srv)
			status400 := http.StatusBadRequest
			if transport == "stdio" {
				status400 = 0
			}

			_, r1 := ex(t, "test_ask", modernCall(1, "test_ask", `{"greeting":"so"}`, all, ""))
			res1 := r1["result"].(map[string]any)
			state1, _ := res1["requestState"].(string)
			if res1["resultType"] != "input_required" || state1 == "" {
				t.Fatalf("round 1 = %v; want input_required with a requestState", r1)
			}
			if diff := cmp.Diff([]string{"name"}, keys(res1["inputRequests"])); diff != "" {
				t.Errorf("round 1 questions (-want +got):\n%s", diff)
			}

			_, r2 := ex(t, "test_ask", modernCall(2, "test_ask", `{ "greeting": "so" }`, all,
				`,"inputResponses":{"name":`+answer("Ada")+`},"requestState":"`+state1+`"`))
			res2 := r2["result"].(map[string]any)
			state2, _ := res2["requestState"].(string)
			if diff := cmp.Diff([]string{"elicitation-2"}, keys(res2["inputRequests"])); diff != "" || state2 == state1 {
				t.Fatalf("round 2 = %v; want a new question and a new state (-want +got):\n%s", r2, diff)
			}

			_, r3 := ex(t, "test_ask", modernCall(3, "test_ask", `{"greeting":"so"}`, all,
				`,"inputResponses":{"elicitation-2":`+answer("green")+`},"requestState":"`+state2+`"`))
			if got := resultText(r3); got != "so Ada likes green" {
				t.Errorf("round 3 = %v; want the text %q", r3, "so Ada likes green")
			}
			if n := runs.Load(); n != 3 {
				t.Errorf("the tool ran %d times; want 3 (once per round)", n)
			}

			refusals := []struct {
				name, tool, line, code string
			}{
				{"tampered state", "test_ask", modernCall(4, "test_ask", `{"greeting":"so"}`, all, `,"requestState":"`+state2+`-TAMPERED"`), "-32602"},
				{"state of other arguments", "test_ask", modernCall(5, "test_ask", `{"greeting":"hey"}`, all, `,"requestState":"`+state1+`"`), "-32602"},
				{"state of another tool", "test_ask2", modernCall(6, "test_ask2", `{}`, all, `,"requestState":"`+state1+`"`), "-32602"},
				{"missing required capability", "test_needs", modernCall(7, "test_needs", `{}`, `{}`, ""), "-32021"},
			}
			for _, c := range refusals {
				status, r := ex(t, c.tool, c.line)
				code, msg := errorOf(r)
				if code != c.code || status != status400 {
					t.Errorf("%s: status %d, error %s %q; want %d, %s", c.name, status, code, msg, status400, c.code)
				}
			}
			_, r := ex(t, "test_needs", modernCall(8, "test_needs", `{}`, `{}`, ""))
			data, _ := r["error"].(map[string]any)["data"].(map[string]any)
			if diff := cmp.Diff(map[string]any{"requiredCapabilities": map[string]any{"sampling": map[string]any{}}}, data); diff != "" {
				t.Errorf("-32021 data (-want +got):\n%s", diff)
			}

			// A tool that asks without the capability gets a tool error.
			_, r = ex(t, "test_ask2", modernCall(9, "test_ask2", `{}`, `{"sampling":{}}`, ""))
			if res, _ := r["result"].(map[string]any); res["isError"] != true || !strings.Contains(resultText(r), "elicitation capability") {
				t.Errorf("asking without the capability = %v; want a tool error naming it", r)
			}
		})
	}
}

func keys(v any) []string {
	m, _ := v.(map[string]any)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func resultText(r map[string]any) string {
	res, _ := r["result"].(map[string]any)
	content, _ := res["content"].([]any)
	var b strings.Builder
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			b.WriteString(fmt.Sprint(m["text"]))
		}
	}
	return b.String()
}

// askingClient answers every kind of question, as a client's user and
// model would.
type askingClient struct{}

func (askingClient) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"v": "Ada"}}}, nil
}

func (askingClient) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("hello")}, Model: "m"}, nil
}

func (askingClient) ListRoots(ctx context.Context, req mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///w", Name: "w"}}}, nil
}

// TestAskingTheClientOnBothEras runs one tool that elicits, samples and
// lists roots against the mcp-go client on a 2025 session (server-to-client
// requests) and on the 2026-07-28 wire (input_required rounds, which the
// client drives itself): the tool's code and its answer are the same.
func TestAskingTheClientOnBothEras(t *testing.T) {
	reg := registry.New()
	schema := json.RawMessage(`{"type":"object","properties":{"v":{"type":"string"}}}`)
	reg.MustRegister(registry.MustNewTool("test.all", "Ask everything.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		name, err := tc.Elicit(ctx, registry.ElicitRequest{Message: "Name?", Schema: schema})
		if err != nil {
			return "", err
		}
		said, err := tc.Sample(ctx, registry.SampleRequest{Messages: []registry.SampleMessage{{Role: "user", Text: "greet"}}})
		if err != nil {
			return "", err
		}
		roots, err := tc.Roots(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %v at %s", said.Text, name.Content["v"], roots[0].URI), nil
	}))
	srv := newServer(t, newHost(t, reg, ""))
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	defer func() { closeSessions(context.Background()); ts.Close() }()
	for _, version := range []string{legacy, modern} {
		t.Run(version, func(t *testing.T) {
			var opts []transport.StreamableHTTPCOption
			if version == legacy {
				// 2025 sessions carry sampling on the GET stream.
				//lint:ignore SA1019 the 2025 protocol's GET stream is what sampling needs there
				opts = append(opts, transport.WithContinuousListening())
			}
			tr, err := transport.NewStreamableHTTP(ts.URL+"/mcp", opts...)
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewClient(tr, client.WithProtocolVersion(version), client.WithElicitationHandler(askingClient{}),
				client.WithSamplingHandler(askingClient{}), client.WithRootsHandler(askingClient{}))
			if err := c.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = version
			if _, err := c.Initialize(t.Context(), init); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "test_all"
			res, err := c.CallTool(ctx, req)
			if err != nil || res.IsError || text(res) != "hello Ada at file:///w" {
				t.Errorf("test_all = %+v, %v; want %q", res, err, "hello Ada at file:///w")
			}
		})
	}
}
