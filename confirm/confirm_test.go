package confirm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	_ "github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/config"
	_ "github.com/bubbuild/bub-mcp/confirm"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// elicitor answers confirmations with its action; "" leaves them
// unanswered until the server gives up. It records the questions.
type elicitor struct {
	mu        sync.Mutex
	action    mcp.ElicitationResponseAction
	questions []string
}

func (e *elicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	e.questions = append(e.questions, req.Params.Message)
	action := e.action
	e.mu.Unlock()
	if action == "" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: action}}, nil
}

func (e *elicitor) set(a mcp.ElicitationResponseAction) {
	e.mu.Lock()
	e.action, e.questions = a, nil
	e.mu.Unlock()
}

func (e *elicitor) asked() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.questions...)
}

// session serves an App over stdio (the 2025 session protocol) to an
// mcp-go client of profile; el nil means a client without the elicitation
// capability. ran counts test.write's runs.
func session(t *testing.T, el *elicitor, ran *atomic.Int64, profile string) *client.Client {
	t.Helper()
	return connect(t, newServer(t, ran), el, profile)
}

// newServer serves test.write (counted by ran) and test.read with the
// test profiles.
func newServer(t *testing.T, ran *atomic.Int64) *mcpserver.Server {
	t.Helper()
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("test.write", "Change something.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		What string `json:"what"`
	}) (string, error) {
		ran.Add(1)
		return "wrote " + in.What, nil
	}))
	reg.MustRegister(registry.MustNewTool("test.read", "Look at something.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return "read", nil
	}))
	cfg, err := config.Parse("t.toml", `
[profiles.default]
confirm = ["test.write"]
confirm_timeout = "300ms"

[profiles.code]
code_mode = true
confirm = ["test_w*"]
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: reg, Modules: []string{"confirm", "codemode"},
		Home: t.TempDir(), Workspace: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv, err := mcpserver.New(&mcpserver.Options{Backend: a, Registry: a.Registry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func connect(t *testing.T, srv *mcpserver.Server, el *elicitor, profile string) *client.Client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- stdio.Serve(ctx, srv, inR, outW, providers.Connection{Profile: profile}, time.Second)
	}()
	opts := []client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20251125)}
	if el != nil {
		opts = append(opts, client.WithElicitationHandler(el))
	}
	c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(nil)), opts...)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		inW.Close()
		cancel()
		<-served
	})
	return c
}

func call(t *testing.T, c *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

func TestConfirm(t *testing.T) {
	var ran atomic.Int64
	el := &elicitor{}
	c := session(t, el, &ran, "default")
	tests := []struct {
		name    string
		action  mcp.ElicitationResponseAction
		tool    string
		want    string // substring of the result text
		isError bool
		runs    int64 // handler runs expected
		asks    int
	}{
		{"accepted", mcp.ElicitationResponseActionAccept, "test_write", "wrote x", false, 1, 1},
		{"declined", mcp.ElicitationResponseActionDecline, "test_write", "Tool 'test_write' was not run: the user declined it.", true, 0, 1},
		{"cancelled", mcp.ElicitationResponseActionCancel, "test_write", "the user cancelled the confirmation", true, 0, 1},
		{"unanswered", "", "test_write", "did not answer the confirmation within 300ms (profiles.default.confirm_timeout)", true, 0, 1},
		{"not matched", mcp.ElicitationResponseActionDecline, "test_read", "read", false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			el.set(tt.action)
			before := ran.Load()
			args := map[string]any{}
			if tt.tool == "test_write" {
				args["what"] = "x"
			}
			text, isError := call(t, c, tt.tool, args)
			if isError != tt.isError || !strings.Contains(text, tt.want) {
				t.Errorf("%s = %q (isError %v); want %q (isError %v)", tt.tool, text, isError, tt.want, tt.isError)
			}
			if got := ran.Load() - before; got != tt.runs {
				t.Errorf("handler ran %d times; want %d", got, tt.runs)
			}
			q := el.asked()
			if len(q) != tt.asks {
				t.Fatalf("asked %d times (%q); want %d", len(q), q, tt.asks)
			}
			if tt.asks > 0 && (!strings.Contains(q[0], "test.write") || !strings.Contains(q[0], `"what":"x"`)) {
				t.Errorf("question %q does not name the tool and its arguments", q[0])
			}
		})
	}
}

func TestConfirmNestedInRunCode(t *testing.T) {
	var ran atomic.Int64
	el := &elicitor{}
	// The code profile puts test.write behind run_code.
	srvClient := session(t, el, &ran, "code")
	for _, tt := range []struct {
		action mcp.ElicitationResponseAction
		want   string
		runs   int64
	}{
		{mcp.ElicitationResponseActionAccept, "wrote nested", 1},
		{mcp.ElicitationResponseActionDecline, "BubError [tool] Tool 'test_write' was not run: the user declined it.", 0},
	} {
		el.set(tt.action)
		before := ran.Load()
		code := "try:\n    print(await tools.test_write(what='nested'))\nexcept Exception as e:\n    print(type(e).__name__, e)"
		text, isError := call(t, srvClient, "run_code", map[string]any{"code": code})
		if isError || !strings.Contains(text, tt.want) {
			t.Errorf("run_code with %s = %q (isError %v); want %q", tt.action, text, isError, tt.want)
		}
		if got := ran.Load() - before; got != tt.runs {
			t.Errorf("handler ran %d times; want %d", got, tt.runs)
		}
		if q := el.asked(); len(q) != 1 || !strings.Contains(q[0], "from code in run_code") {
			t.Errorf("questions = %q; want one about a call from run_code", q)
		}
	}
}

func TestConfirmWithoutElicitation(t *testing.T) {
	var ran atomic.Int64
	c := session(t, nil, &ran, "default")
	text, isError := call(t, c, "test_write", map[string]any{"what": "x"})
	if !isError || !strings.Contains(text, "profiles.default.confirm") || !strings.Contains(text, "elicitation") {
		t.Errorf("test_write from a client without elicitation = %q (isError %v); want a refusal naming profiles.default.confirm", text, isError)
	}
	if ran.Load() != 0 {
		t.Error("the tool ran without confirmation")
	}
}

// TestConfirmModern asks on the 2026-07-28 wire, where the question is a
// multi-round-trip input request and the call runs again with the answer.
func TestConfirmModern(t *testing.T) {
	var ran atomic.Int64
	srv := newServer(t, &ran)
	handler := streamhttp.New(srv, streamhttp.Options{DefaultProfile: "default", Profiles: []string{"default"}})
	closeSessions := handler.CloseSessions
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	post := func(id int, caps, extra string) map[string]any {
		t.Helper()
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"test_write","arguments":{"what":"x"}%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":%s}}}`, id, extra, caps)
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(line))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "test_write")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body := string(b)
		if i := strings.LastIndex(body, "data: "); i >= 0 {
			body = body[i+len("data: "):]
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &m); err != nil {
			t.Fatalf("HTTP %d %q: %v", resp.StatusCode, b, err)
		}
		res, _ := m["result"].(map[string]any)
		if res == nil {
			t.Fatalf("no result: %v", m)
		}
		return res
	}
	text := func(res map[string]any) string {
		var b strings.Builder
		content, _ := res["content"].([]any)
		for _, c := range content {
			if m, ok := c.(map[string]any); ok {
				b.WriteString(fmt.Sprint(m["text"]))
			}
		}
		return b.String()
	}
	caps := `{"elicitation":{}}`
	for _, tt := range []struct {
		action, want string
		runs         int64
	}{
		{"accept", "wrote x", 1},
		{"decline", "the user declined it", 0},
	} {
		t.Run(tt.action, func(t *testing.T) {
			before := ran.Load()
			r1 := post(1, caps, "")
			state, _ := r1["requestState"].(string)
			reqs, _ := r1["inputRequests"].(map[string]any)
			if r1["resultType"] != "input_required" || state == "" || len(reqs) != 1 {
				t.Fatalf("round 1 = %v; want one input request", r1)
			}
			var key string
			for k := range reqs {
				key = k
			}
			if !strings.HasPrefix(key, "confirm-test.write-") {
				t.Errorf("question key %q; want confirm-test.write-<hash>", key)
			}
			r2 := post(2, caps, fmt.Sprintf(`,"inputResponses":{%q:{"action":%q}},"requestState":%q`, key, tt.action, state))
			if got := text(r2); !strings.Contains(got, tt.want) {
				t.Errorf("round 2 = %v; want %q", r2, tt.want)
			}
			if got := ran.Load() - before; got != tt.runs {
				t.Errorf("handler ran %d times; want %d", got, tt.runs)
			}
		})
	}
	t.Run("no elicitation capability", func(t *testing.T) {
		r := post(3, `{}`, "")
		if r["isError"] != true || !strings.Contains(text(r), "profiles.default.confirm") {
			t.Errorf("result = %v; want a refusal naming profiles.default.confirm", r)
		}
	})
}
