package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	_ "github.com/bubbuild/bub-mcp/codemode" // run_code for the nested-call test
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/telemetry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracedServer is a server whose telemetry records spans in process and
// measures, served over HTTP on loopback (with /metrics) and over stdio.
type tracedServer struct {
	url string
	srv *mcpserver.Server
	rec *tracetest.SpanRecorder
}

type tracedOptions struct {
	src     string   // bub.toml
	modules []string // app modules; nil means none
	exts    []mcpserver.Extension
	tokens  []streamhttp.Token
}

func telRegistry() *registry.Registry {
	r := registry.New()
	r.MustRegister(registry.MustNewTool("test.echo", "Echo a message.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Message string `json:"message"`
	}) (string, error) {
		return "Echo: " + in.Message, nil
	}))
	r.MustRegister(registry.MustNewTool("test.fail", "Always fail.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return "", registry.NewError(registry.KindTool, "it failed on purpose", nil)
	}))
	return r
}

func newTraced(t *testing.T, o tracedOptions) *tracedServer {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tel, err := telemetry.New(&telemetry.Options{Getenv: func(string) string { return "" }, TracerProvider: tp, Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("test.toml", o.src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	modules := o.modules
	if modules == nil {
		modules = []string{}
	}
	h, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: telRegistry(), Modules: modules, Home: t.TempDir(), Workspace: t.TempDir(),
		Logger: slog.New(slog.DiscardHandler), Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Extensions: o.exts, Logger: slog.New(slog.DiscardHandler), Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}, Tokens: o.tokens, Metrics: tel.MetricsHandler()})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closeSessions(ctx)
		ts.Close()
	})
	return &tracedServer{url: ts.URL, srv: srv, rec: rec}
}

// stdio connects an mcp-go client to the server over in-process pipes.
func (s *tracedServer) stdio(t *testing.T, version string) *client.Client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		stdio.Serve(ctx, s.srv, inR, outW, providers.Connection{Profile: "default"}, time.Second)
	}()
	t.Cleanup(func() { cancel(); inW.Close(); <-done })
	c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(nil)), client.WithProtocolVersion(version))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "bub-test", Version: "1.2.3"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return c
}

// traceparent is a sampled W3C traceparent for trace n, with span id n.
func traceparent(n int) (traceID, spanID, header string) {
	traceID, spanID = fmt.Sprintf("%032x", 0xabc000+n), fmt.Sprintf("%016x", 0xdef000+n)
	return traceID, spanID, "00-" + traceID + "-" + spanID + "-01"
}

// callMeta calls a tool with _meta.traceparent set (when given).
func callMeta(t *testing.T, c *client.Client, name string, args map[string]any, tp string) (*mcp.CallToolResult, error) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if tp != "" {
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": tp}}
	}
	return c.CallTool(t.Context(), req)
}

// ended returns the recorded spans named name in trace traceID.
func ended(rec *tracetest.SpanRecorder, name, traceID string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name && s.SpanContext().TraceID().String() == traceID {
			out = append(out, s)
		}
	}
	return out
}

func oneSpan(t *testing.T, rec *tracetest.SpanRecorder, name, traceID string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := ended(rec, name, traceID)
	if len(got) != 1 {
		var all []string
		for _, s := range rec.Ended() {
			all = append(all, s.Name()+" "+s.SpanContext().TraceID().String())
		}
		t.Fatalf("spans %q in trace %s: %d; want 1 (recorded: %q)", name, traceID, len(got), all)
	}
	return got[0]
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// TestTelemetrySpans checks the server span of a tools/call on both eras
// and both transports: name, attributes, kind, and the parent taken from
// params._meta.traceparent.
func TestTelemetrySpans(t *testing.T) {
	s := newTraced(t, tracedOptions{src: "[profiles.default]\n"})
	tests := []struct {
		name      string
		client    func() *client.Client
		version   string
		transport string
		session   bool // mcp.session.id expected
	}{
		{"stdio " + legacy, func() *client.Client { return s.stdio(t, legacy) }, legacy, "pipe", true},
		{"stdio " + modern, func() *client.Client { return s.stdio(t, modern) }, modern, "pipe", false},
		{"http " + legacy, func() *client.Client { return connect(t, s.url+"/mcp", legacy, nil) }, legacy, "tcp", true},
		{"http " + modern, func() *client.Client { return connect(t, s.url+"/mcp", modern, nil) }, modern, "tcp", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.client()
			traceID, parentID, tp := traceparent(i)
			res, err := callMeta(t, c, "test_echo", map[string]any{"message": "hi"}, tp)
			if err != nil || res.IsError {
				t.Fatalf("test_echo = %+v, %v", res, err)
			}
			sp := oneSpan(t, s.rec, "tools/call test_echo", traceID)
			if got := sp.Parent().SpanID().String(); got != parentID || !sp.Parent().IsRemote() {
				t.Errorf("parent span = %s (remote %v); want %s from _meta", got, sp.Parent().IsRemote(), parentID)
			}
			if sp.SpanKind() != trace.SpanKindServer {
				t.Errorf("kind = %v; want server", sp.SpanKind())
			}
			if sp.Status().Code != codes.Unset {
				t.Errorf("status = %+v; want unset", sp.Status())
			}
			attrs := spanAttrs(sp)
			if _, err := strconv.Atoi(attrs["jsonrpc.request.id"]); err != nil {
				t.Errorf("jsonrpc.request.id = %q; want the client's integer id", attrs["jsonrpc.request.id"])
			}
			if sid := attrs["mcp.session.id"]; (sid != "") != tt.session {
				t.Errorf("mcp.session.id = %q; want one: %v", sid, tt.session)
			}
			delete(attrs, "jsonrpc.request.id")
			delete(attrs, "mcp.session.id")
			want := map[string]string{
				"mcp.method.name":       "tools/call",
				"gen_ai.tool.name":      "test_echo",
				"gen_ai.operation.name": "execute_tool",
				"mcp.protocol.version":  tt.version,
				"network.transport":     tt.transport,
			}
			if tt.transport == "tcp" {
				want["network.protocol.name"] = "http"
			}
			if diff := cmp.Diff(want, attrs); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTelemetryHeaderParent checks that the W3C traceparent header is the
// parent when _meta has none, and a link when _meta has one.
func TestTelemetryHeaderParent(t *testing.T) {
	s := newTraced(t, tracedOptions{src: "[profiles.default]\n"})
	for i, version := range []string{legacy, modern} {
		t.Run(version, func(t *testing.T) {
			headerTrace, headerSpan, headerTP := traceparent(100 + i)
			c := connect(t, s.url+"/mcp", version, map[string]string{"traceparent": headerTP})
			if _, err := callMeta(t, c, "test_echo", map[string]any{"message": "hi"}, ""); err != nil {
				t.Fatal(err)
			}
			// Every request of this client carries the header, so the trace
			// holds its initialize too (on 2025 sessions).
			calls := ended(s.rec, "tools/call test_echo", headerTrace)
			if len(calls) != 1 {
				t.Fatalf("tools/call spans in the header's trace: %d; want 1", len(calls))
			}
			if got := calls[0].Parent().SpanID().String(); got != headerSpan {
				t.Errorf("parent = %s; want %s from the traceparent header", got, headerSpan)
			}

			metaTrace, metaSpan, metaTP := traceparent(200 + i)
			if _, err := callMeta(t, c, "test_echo", map[string]any{"message": "hi"}, metaTP); err != nil {
				t.Fatal(err)
			}
			sp := oneSpan(t, s.rec, "tools/call test_echo", metaTrace)
			if got := sp.Parent().SpanID().String(); got != metaSpan {
				t.Errorf("parent = %s; want %s from _meta, which wins over the header", got, metaSpan)
			}
			if links := sp.Links(); len(links) != 1 || links[0].SpanContext.TraceID().String() != headerTrace || links[0].SpanContext.SpanID().String() != headerSpan {
				t.Errorf("links = %+v; want one to the header's span %s/%s", links, headerTrace, headerSpan)
			}
		})
	}
}

// TestTelemetryOutcomes checks error.type: tool_error for an isError
// result, the JSON-RPC code for a protocol error, on both eras.
func TestTelemetryOutcomes(t *testing.T) {
	s := newTraced(t, tracedOptions{src: "[profiles.default]\n"})
	for i, version := range []string{legacy, modern} {
		t.Run(version, func(t *testing.T) {
			c := connect(t, s.url+"/mcp", version, nil)

			traceID, _, tp := traceparent(300 + i)
			res, err := callMeta(t, c, "test_fail", nil, tp)
			if err != nil || !res.IsError {
				t.Fatalf("test_fail = %+v, %v; want an isError result", res, err)
			}
			sp := oneSpan(t, s.rec, "tools/call test_fail", traceID)
			if got := spanAttrs(sp)["error.type"]; got != telemetry.ToolError {
				t.Errorf("error.type = %q; want %q", got, telemetry.ToolError)
			}
			if st := sp.Status(); st.Code != codes.Error || !strings.Contains(st.Description, "it failed on purpose") {
				t.Errorf("status = %+v; want an error naming the tool's message", st)
			}

			traceID, _, tp = traceparent(310 + i)
			if _, err := callMeta(t, c, "no_such_tool", nil, tp); err == nil {
				t.Fatal("no_such_tool: want a JSON-RPC error")
			}
			sp = oneSpan(t, s.rec, "tools/call no_such_tool", traceID)
			attrs := spanAttrs(sp)
			code := strconv.Itoa(mcp.INVALID_PARAMS)
			if attrs["error.type"] != code || attrs["rpc.response.status_code"] != code {
				t.Errorf("error.type = %q, rpc.response.status_code = %q; want %s", attrs["error.type"], attrs["rpc.response.status_code"], code)
			}
			if st := sp.Status(); st.Code != codes.Error || !strings.Contains(st.Description, "not found") {
				t.Errorf("status = %+v; want the JSON-RPC error message", st)
			}
		})
	}
}

// needPython skips a test that needs python3 where it is missing, except
// in CI (CI=true), where a missing dependency must fail the run.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 not installed")
		}
		t.Skip("python3 not installed")
	}
}

// TestTelemetryNestedCalls checks that run_code's nested tool calls are
// child spans of its tools/call span, failures included, and are counted
// as nested calls.
func TestTelemetryNestedCalls(t *testing.T) {
	needPython(t)
	s := newTraced(t, tracedOptions{src: "[profiles.default]\ncode_mode = true\n", modules: []string{"codemode"}})
	for i, tc := range []struct {
		name string
		c    func() *client.Client
	}{
		{"stdio " + legacy, func() *client.Client { return s.stdio(t, legacy) }},
		{"http " + modern, func() *client.Client { return connect(t, s.url+"/mcp", modern, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c()
			traceID, _, tp := traceparent(400 + i)
			code := "print(await tools.test_echo(message='a'))\ntry:\n    await tools.test_fail()\nexcept Exception as e:\n    print('failed')"
			res, err := callMeta(t, c, "run_code", map[string]any{"code": code}, tp)
			if err != nil || res.IsError || !strings.Contains(text(res), "Echo: a") || !strings.Contains(text(res), "failed") {
				t.Fatalf("run_code = %+v, %v", res, err)
			}
			parent := oneSpan(t, s.rec, "tools/call run_code", traceID)
			for _, want := range []struct{ name, errType string }{{"execute_tool test_echo", ""}, {"execute_tool test_fail", telemetry.ToolError}} {
				sp := oneSpan(t, s.rec, want.name, traceID)
				if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
					t.Errorf("%s: parent = %s; want run_code's span %s", want.name, sp.Parent().SpanID(), parent.SpanContext().SpanID())
				}
				if sp.SpanKind() != trace.SpanKindInternal {
					t.Errorf("%s: kind = %v; want internal", want.name, sp.SpanKind())
				}
				if got := spanAttrs(sp)["error.type"]; got != want.errType {
					t.Errorf("%s: error.type = %q; want %q", want.name, got, want.errType)
				}
			}
		})
	}
	body := scrape(t, s.url, "")
	for _, line := range []string{
		`bub_mcp_tool_calls_total{gen_ai_tool_name="test_echo",mode="nested",outcome="ok"} 2`,
		`bub_mcp_tool_calls_total{gen_ai_tool_name="test_fail",mode="nested",outcome="tool_error"} 2`,
		`bub_mcp_tool_calls_total{gen_ai_tool_name="run_code",mode="direct",outcome="ok"} 2`,
		`bub_mcp_tool_calls_active{gen_ai_tool_name="test_echo",mode="nested"} 0`,
	} {
		if !hasLine(body, line) {
			t.Errorf("/metrics lacks %q:\n%s", line, body)
		}
	}
}

func scrape(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %s %q\n%s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	return string(b)
}

func hasLine(body, line string) bool {
	for l := range strings.SplitSeq(body, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// TestTelemetryMetrics scrapes /metrics over HTTP after known traffic:
// operation durations by method, tool and error type; calls by outcome;
// calls in flight; open sessions.
func TestTelemetryMetrics(t *testing.T) {
	s := newTraced(t, tracedOptions{src: "[profiles.default]\n"})
	clients := []*client.Client{
		s.stdio(t, legacy),                    // a session
		s.stdio(t, modern),                    // a session: the stdio connection
		connect(t, s.url+"/mcp", legacy, nil), // a session
		connect(t, s.url+"/mcp", modern, nil), // sessionless
	}
	for _, c := range clients {
		for range 3 {
			if res, err := callMeta(t, c, "test_echo", map[string]any{"message": "x"}, ""); err != nil || res.IsError {
				t.Fatalf("test_echo = %+v, %v", res, err)
			}
		}
		if res, err := callMeta(t, c, "test_fail", nil, ""); err != nil || !res.IsError {
			t.Fatalf("test_fail = %+v, %v", res, err)
		}
		if _, err := callMeta(t, c, "no_such_tool", nil, ""); err == nil {
			t.Fatal("no_such_tool: want an error")
		}
	}
	body := scrape(t, s.url, "")
	for _, line := range []string{
		`mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="test_echo"} 12`,
		`mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="test_fail",error_type="tool_error"} 4`,
		`mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="no_such_tool",error_type="-32602"} 4`,
		`mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="test_echo",le="+Inf"} 12`,
		`bub_mcp_tool_calls_total{gen_ai_tool_name="test_echo",mode="direct",outcome="ok"} 12`,
		`bub_mcp_tool_calls_total{gen_ai_tool_name="test_fail",mode="direct",outcome="tool_error"} 4`,
		`bub_mcp_tool_calls_total{gen_ai_tool_name="no_such_tool",mode="direct",outcome="error"} 4`,
		`bub_mcp_tool_calls_active{gen_ai_tool_name="test_echo",mode="direct"} 0`,
		`bub_mcp_sessions_active 3`,
	} {
		if !hasLine(body, line) {
			t.Errorf("/metrics lacks %q:\n%s", line, body)
		}
	}
	// The 2025 clients initialize; the 2026-07-28 ones discover instead.
	for _, line := range []string{
		`mcp_server_operation_duration_seconds_count{mcp_method_name="initialize"} 2`,
		`mcp_server_operation_duration_seconds_count{mcp_method_name="server/discover"} 2`,
	} {
		if !hasLine(body, line) {
			t.Errorf("/metrics lacks %q:\n%s", line, body)
		}
	}
}

// TestMetricsNeedToken checks that with tokens configured a scrape needs
// one, since the metrics name tools and their use.
func TestMetricsNeedToken(t *testing.T) {
	const tok = "metrics-token"
	s := newTraced(t, tracedOptions{src: "[profiles.default]\n", tokens: []streamhttp.Token{{Name: "prom", SHA256: config.HashToken(tok), Profile: "default"}}})
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %s; want 401", resp.Status)
	}
	if body := scrape(t, s.url, tok); !hasLine(body, "bub_mcp_sessions_active 0") {
		t.Errorf("GET /metrics with a token:\n%s", body)
	}
}

// TestTelemetryOffInstallsNothing checks that a server without telemetry,
// or with telemetry that neither traces nor measures, installs no hook
// for it: it pays nothing for the feature.
func TestTelemetryOffInstallsNothing(t *testing.T) {
	disabled, err := telemetry.New(&telemetry.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	metricsOnly, err := telemetry.New(&telemetry.Options{Getenv: func(string) string { return "" }, Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, telRegistry(), "")
	for _, tt := range []struct {
		name string
		tel  *telemetry.Telemetry
		want int
	}{{"nil", nil, 0}, {"disabled", disabled, 0}, {"metrics", metricsOnly, 1}} {
		srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler), Telemetry: tt.tel})
		if err != nil {
			t.Fatal(err)
		}
		hooks := srv.MCP().GetHooks()
		got := []int{len(hooks.OnBeforeAny), len(hooks.OnSuccess), len(hooks.OnError), len(hooks.OnRegisterSession), len(hooks.OnUnregisterSession)}
		// Every server has one UnregisterSession hook of its own (the
		// parked GET streams' state goes with the session).
		if want := []int{tt.want, tt.want, tt.want, tt.want, tt.want + 1}; !cmp.Equal(got, want) {
			t.Errorf("%s: BeforeAny, Success, Error, RegisterSession, UnregisterSession hooks = %v; want %v", tt.name, got, want)
		}
	}
}
