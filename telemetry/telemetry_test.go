package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/bubbuild/bub-mcp/telemetry"
)

// W3C examples: the one the MCP conventions show in params._meta, and
// another one for HTTP headers, so a test can tell which one was used.
const (
	metaTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	metaSpanID     = "00f067aa0ba902b7"
	metaParent     = "00-" + metaTraceID + "-" + metaSpanID + "-01"
	metaState      = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
	headerTraceID  = "0af7651916cd43dd8448eb211c80319c"
	headerSpanID   = "b7ad6b7169203331"
	headerParent   = "00-" + headerTraceID + "-" + headerSpanID + "-01"
	ambientTraceID = "11111111111111111111111111111111"
	ambientSpanID  = "2222222222222222"
)

func noenv(string) string { return "" }

// newRecorded returns telemetry whose spans go to an in-process recorder.
func newRecorded(t *testing.T, metrics bool) (*telemetry.Telemetry, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tel, err := telemetry.New(&telemetry.Options{Getenv: noenv, TracerProvider: tp, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	return tel, rec
}

func attrMap(s sdktrace.ReadOnlySpan) map[string]string {
	m := make(map[string]string)
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func onlySpan(t *testing.T, rec *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
	t.Helper()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("ended spans = %d; want 1", len(ended))
	}
	return ended[0]
}

func TestStartRequestNamesAndAttributes(t *testing.T) {
	tests := []struct {
		name     string
		req      telemetry.Request
		wantName string
		want     map[string]string
	}{
		{
			name: "tool call over stdio",
			req: telemetry.Request{
				Method: "tools/call", Tool: "fs.read", SessionID: "s-1", RequestID: "7",
				ProtocolVersion: "2025-06-18", Transport: telemetry.TransportPipe,
			},
			wantName: "tools/call fs.read",
			want: map[string]string{
				"mcp.method.name":       "tools/call",
				"gen_ai.tool.name":      "fs.read",
				"gen_ai.operation.name": "execute_tool",
				"mcp.session.id":        "s-1",
				"jsonrpc.request.id":    "7",
				"mcp.protocol.version":  "2025-06-18",
				"network.transport":     "pipe",
			},
		},
		{
			name: "sessionless list over HTTP",
			req: telemetry.Request{
				Method: "tools/list", RequestID: "req-2", ProtocolVersion: "2026-07-28",
				Transport: telemetry.TransportTCP, Header: http.Header{},
			},
			wantName: "tools/list",
			want: map[string]string{
				"mcp.method.name":       "tools/list",
				"jsonrpc.request.id":    "req-2",
				"mcp.protocol.version":  "2026-07-28",
				"network.transport":     "tcp",
				"network.protocol.name": "http",
			},
		},
		{
			name:     "notification has no request id",
			req:      telemetry.Request{Method: "notifications/initialized"},
			wantName: "notifications/initialized",
			want:     map[string]string{"mcp.method.name": "notifications/initialized"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel, rec := newRecorded(t, false)
			_, span := tel.StartRequest(context.Background(), tt.req)
			span.End(telemetry.Outcome{})
			got := onlySpan(t, rec)
			if got.Name() != tt.wantName {
				t.Errorf("span name = %q; want %q", got.Name(), tt.wantName)
			}
			if got.SpanKind() != trace.SpanKindServer {
				t.Errorf("span kind = %v; want server", got.SpanKind())
			}
			if diff := cmp.Diff(tt.want, attrMap(got)); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
			if got.Status().Code != codes.Unset {
				t.Errorf("status = %v; want unset on success", got.Status())
			}
		})
	}
}

func TestOutcomeErrorType(t *testing.T) {
	tests := []struct {
		name       string
		outcome    telemetry.Outcome
		want       map[string]string // error attributes only
		wantStatus sdktrace.Status
	}{
		{
			name:       "tool error result",
			outcome:    telemetry.Outcome{ErrorType: telemetry.ToolError, Message: "no such file"},
			want:       map[string]string{"error.type": "tool_error"},
			wantStatus: sdktrace.Status{Code: codes.Error, Description: "no such file"},
		},
		{
			name:    "JSON-RPC error",
			outcome: telemetry.RPCError(-32602, "invalid params"),
			want: map[string]string{
				"error.type":               "-32602",
				"rpc.response.status_code": "-32602",
			},
			wantStatus: sdktrace.Status{Code: codes.Error, Description: "invalid params"},
		},
		{
			name:       "success",
			want:       map[string]string{},
			wantStatus: sdktrace.Status{Code: codes.Unset},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel, rec := newRecorded(t, false)
			_, span := tel.StartRequest(context.Background(), telemetry.Request{Method: "tools/call", Tool: "bash"})
			span.End(tt.outcome)
			span.End(telemetry.Outcome{ErrorType: "ignored"}) // a second End is a no-op
			got := attrMap(onlySpan(t, rec))
			errAttrs := map[string]string{}
			for _, k := range []string{"error.type", "rpc.response.status_code"} {
				if v, ok := got[k]; ok {
					errAttrs[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, errAttrs); diff != "" {
				t.Errorf("error attributes (-want +got):\n%s", diff)
			}
			if st := onlySpan(t, rec).Status(); st != tt.wantStatus {
				t.Errorf("status = %+v; want %+v", st, tt.wantStatus)
			}
		})
	}
}

func TestParent(t *testing.T) {
	ambient := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: mustTraceID(ambientTraceID), SpanID: mustSpanID(ambientSpanID), TraceFlags: trace.FlagsSampled,
	}))
	header := http.Header{"Traceparent": {headerParent}}
	meta := map[string]any{"traceparent": metaParent, "tracestate": metaState, "progressToken": 3}

	tests := []struct {
		name        string
		ctx         context.Context
		meta        map[string]any
		header      http.Header
		wantTrace   string
		wantParent  string
		wantState   string
		wantLinks   []string // span ids
		wantRemote  bool
		wantNoTrace bool
	}{
		{name: "from _meta", ctx: context.Background(), meta: meta,
			wantTrace: metaTraceID, wantParent: metaSpanID, wantState: metaState, wantRemote: true},
		{name: "from headers", ctx: context.Background(), header: header,
			wantTrace: headerTraceID, wantParent: headerSpanID, wantRemote: true},
		{name: "_meta wins, headers linked", ctx: context.Background(), meta: meta, header: header,
			wantTrace: metaTraceID, wantParent: metaSpanID, wantState: metaState, wantRemote: true,
			wantLinks: []string{headerSpanID}},
		{name: "_meta wins, ambient span linked", ctx: ambient, meta: meta, header: header,
			wantTrace: metaTraceID, wantParent: metaSpanID, wantState: metaState, wantRemote: true,
			wantLinks: []string{ambientSpanID}},
		{name: "ambient span beats headers", ctx: ambient, header: header,
			wantTrace: ambientTraceID, wantParent: ambientSpanID},
		{name: "malformed _meta falls back to headers", ctx: context.Background(),
			meta: map[string]any{"traceparent": "00-zz-zz-01"}, header: header,
			wantTrace: headerTraceID, wantParent: headerSpanID, wantRemote: true},
		{name: "non-string _meta value is ignored", ctx: context.Background(),
			meta: map[string]any{"traceparent": 42}, wantNoTrace: true},
		{name: "no context: a root span", ctx: context.Background(), wantNoTrace: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel, rec := newRecorded(t, false)
			_, span := tel.StartRequest(tt.ctx, telemetry.Request{Method: "tools/call", Tool: "bash", Meta: tt.meta, Header: tt.header})
			span.End(telemetry.Outcome{})
			got := onlySpan(t, rec)
			parent := got.Parent()
			if tt.wantNoTrace {
				if parent.IsValid() {
					t.Fatalf("parent = %v; want none", parent)
				}
				return
			}
			if g := got.SpanContext().TraceID().String(); g != tt.wantTrace {
				t.Errorf("trace id = %s; want %s", g, tt.wantTrace)
			}
			if g := parent.SpanID().String(); g != tt.wantParent {
				t.Errorf("parent span id = %s; want %s", g, tt.wantParent)
			}
			if parent.IsRemote() != tt.wantRemote {
				t.Errorf("parent remote = %v; want %v", parent.IsRemote(), tt.wantRemote)
			}
			if g := got.SpanContext().TraceState().String(); g != tt.wantState {
				t.Errorf("tracestate = %q; want %q", g, tt.wantState)
			}
			var links []string
			for _, l := range got.Links() {
				links = append(links, l.SpanContext.SpanID().String())
			}
			if diff := cmp.Diff(tt.wantLinks, links); diff != "" {
				t.Errorf("links (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNestedCallsAreChildren(t *testing.T) {
	tel, rec := newRecorded(t, false)
	ctx, runCode := tel.StartRequest(context.Background(), telemetry.Request{
		Method: "tools/call", Tool: "run_code", Meta: map[string]any{"traceparent": metaParent},
	})
	// Two nested calls, concurrently, as asyncio.gather in run_code makes them.
	var wg sync.WaitGroup
	for _, tool := range []string{"fs.read", "bash"} {
		wg.Go(func() {
			_, s := tel.StartNested(ctx, tool)
			s.End(telemetry.Outcome{})
		})
	}
	wg.Wait()
	// A call nested one level deeper (a subagent inside run_code).
	inner, sub := tel.StartNested(ctx, "agent_run")
	_, leaf := tel.StartNested(inner, "web.fetch")
	leaf.End(telemetry.Outcome{ErrorType: telemetry.ToolError})
	sub.End(telemetry.Outcome{})
	runCode.End(telemetry.Outcome{})

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	root := byName["tools/call run_code"]
	if root == nil {
		t.Fatalf("no run_code span among %v", byName)
	}
	for name, parent := range map[string]string{
		"execute_tool fs.read":   "tools/call run_code",
		"execute_tool bash":      "tools/call run_code",
		"execute_tool agent_run": "tools/call run_code",
		"execute_tool web.fetch": "execute_tool agent_run",
	} {
		s := byName[name]
		if s == nil {
			t.Errorf("no span %q", name)
			continue
		}
		if s.Parent().SpanID() != byName[parent].SpanContext().SpanID() {
			t.Errorf("%q parent = %s; want %q (%s)", name, s.Parent().SpanID(), parent, byName[parent].SpanContext().SpanID())
		}
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("%q is in trace %s; want %s", name, s.SpanContext().TraceID(), root.SpanContext().TraceID())
		}
		if s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("%q kind = %v; want internal", name, s.SpanKind())
		}
		if got := attrMap(s)["gen_ai.tool.name"]; got != strings.TrimPrefix(name, "execute_tool ") {
			t.Errorf("%q gen_ai.tool.name = %q", name, got)
		}
	}
	if got := attrMap(byName["execute_tool web.fetch"])["error.type"]; got != telemetry.ToolError {
		t.Errorf("nested error.type = %q; want %q", got, telemetry.ToolError)
	}
}

func TestMetricsHandler(t *testing.T) {
	tel, err := telemetry.New(&telemetry.Options{Getenv: noenv, Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	call := func(tool string, o telemetry.Outcome) {
		_, s := tel.StartRequest(ctx, telemetry.Request{Method: "tools/call", Tool: tool})
		s.End(o)
	}
	call("fs.read", telemetry.Outcome{})
	call("fs.read", telemetry.Outcome{})
	call("bash", telemetry.Outcome{ErrorType: telemetry.ToolError})
	call(`we"ird\tool`+"\n", telemetry.RPCError(-32602, "bad"))
	rctx, run := tel.StartRequest(ctx, telemetry.Request{Method: "tools/call", Tool: "run_code"})
	_, nested := tel.StartNested(rctx, "fs.read")
	_, inflight := tel.StartNested(rctx, "bash") // still running at the scrape
	nested.End(telemetry.Outcome{})
	run.End(telemetry.Outcome{})
	_, list := tel.StartRequest(ctx, telemetry.Request{Method: "tools/list"})
	list.End(telemetry.Outcome{})
	tel.SessionOpened()
	tel.SessionOpened()
	tel.SessionClosed()

	srv := httptest.NewServer(tel.MetricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d; want 200", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	text := string(body)
	for _, line := range []string{
		"# HELP mcp_server_operation_duration_seconds MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent.",
		"# TYPE mcp_server_operation_duration_seconds histogram",
		`mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="fs.read"} 2`,
		`mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="fs.read",le="+Inf"} 2`,
		`mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="bash",error_type="tool_error"} 1`,
		`mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="we\"ird\\tool\n",error_type="-32602"} 1`,
		`mcp_server_operation_duration_seconds_count{mcp_method_name="tools/list"} 1`,
		"# TYPE bub_mcp_tool_calls_total counter",
		`bub_mcp_tool_calls_total{gen_ai_tool_name="fs.read",mode="direct",outcome="ok"} 2`,
		`bub_mcp_tool_calls_total{gen_ai_tool_name="fs.read",mode="nested",outcome="ok"} 1`,
		`bub_mcp_tool_calls_total{gen_ai_tool_name="bash",mode="direct",outcome="tool_error"} 1`,
		`bub_mcp_tool_calls_total{gen_ai_tool_name="we\"ird\\tool\n",mode="direct",outcome="error"} 1`,
		`bub_mcp_tool_calls_total{gen_ai_tool_name="run_code",mode="direct",outcome="ok"} 1`,
		"# TYPE bub_mcp_tool_calls_active gauge",
		`bub_mcp_tool_calls_active{gen_ai_tool_name="bash",mode="nested"} 1`,
		`bub_mcp_tool_calls_active{gen_ai_tool_name="fs.read",mode="direct"} 0`,
		"# TYPE bub_mcp_sessions_active gauge",
		"bub_mcp_sessions_active 1",
	} {
		if !hasLine(text, line) {
			t.Errorf("exposition lacks line\n%s\nin:\n%s", line, text)
		}
	}
	// Nested calls are inside their request's duration: not counted twice.
	if strings.Contains(text, `mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="fs.read"} 3`) {
		t.Error("nested call counted in mcp.server.operation.duration")
	}
	inflight.End(telemetry.Outcome{})

	resp, err = http.Post(srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST status = %d; want 405", resp.StatusCode)
	}
}

func hasLine(text, line string) bool {
	for l := range strings.SplitSeq(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func TestMetricsDisabled(t *testing.T) {
	tel, err := telemetry.New(&telemetry.Options{Getenv: noenv})
	if err != nil {
		t.Fatal(err)
	}
	rr := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	if rr.Code != http.StatusNotFound {
		t.Errorf("status = %d; want 404 with metrics off", rr.Code)
	}
}

func TestLogHandler(t *testing.T) {
	tel, _ := newRecorded(t, false)
	ctx, span := tel.StartRequest(context.Background(), telemetry.Request{Method: "tools/call", Tool: "bash"})
	defer span.End(telemetry.Outcome{})
	sc := trace.SpanContextFromContext(ctx)

	t.Run("json", func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(telemetry.NewLogHandler(&buf, "json", slog.LevelInfo)).With("component", "mcpserver")
		log.InfoContext(ctx, "call", "tool", "bash")
		log.InfoContext(context.Background(), "no span")
		log.DebugContext(ctx, "below level")

		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("got %d lines; want 2:\n%s", len(lines), buf.String())
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"msg": "call", "level": "INFO", "component": "mcpserver", "tool": "bash",
			"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String(),
		}
		delete(rec, "time")
		if diff := cmp.Diff(want, rec); diff != "" {
			t.Errorf("record (-want +got):\n%s", diff)
		}
		if strings.Contains(lines[1], "trace_id") {
			t.Errorf("record without a span has ids: %s", lines[1])
		}
	})
	t.Run("text", func(t *testing.T) {
		var buf bytes.Buffer
		slog.New(telemetry.NewLogHandler(&buf, "", nil)).InfoContext(ctx, "call")
		if want := "trace_id=" + sc.TraceID().String() + " span_id=" + sc.SpanID().String(); !strings.Contains(buf.String(), want) {
			t.Errorf("text record %q lacks %q", buf.String(), want)
		}
		if strings.HasPrefix(buf.String(), "{") {
			t.Errorf("format \"\" gave JSON: %s", buf.String())
		}
	})
}

func TestNilIsNoop(t *testing.T) {
	var tel *telemetry.Telemetry
	ctx := context.Background()
	gotCtx, span := tel.StartRequest(ctx, telemetry.Request{Method: "tools/call", Tool: "bash"})
	if gotCtx != ctx || span != nil {
		t.Errorf("nil StartRequest = %v, %v; want ctx, nil", gotCtx, span)
	}
	_, nested := tel.StartNested(ctx, "bash")
	nested.End(telemetry.Outcome{ErrorType: telemetry.ToolError})
	span.End(telemetry.Outcome{})
	tel.SessionOpened()
	tel.SessionClosed()
	if err := tel.Shutdown(ctx); err != nil {
		t.Errorf("nil Shutdown = %v", err)
	}
	rr := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	if rr.Code != http.StatusNotFound {
		t.Errorf("nil MetricsHandler status = %d; want 404", rr.Code)
	}
}

// disabled is telemetry with nothing configured: what most servers run.
func disabled(tb testing.TB) *telemetry.Telemetry {
	tb.Helper()
	tel, err := telemetry.New(&telemetry.Options{Getenv: noenv})
	if err != nil {
		tb.Fatal(err)
	}
	return tel
}

var benchReq = telemetry.Request{
	Method: "tools/call", Tool: "fs.read", SessionID: "s-1", RequestID: "7",
	ProtocolVersion: "2025-06-18", Transport: telemetry.TransportTCP,
	Meta:   map[string]any{"traceparent": metaParent},
	Header: http.Header{"Traceparent": {headerParent}},
}

func TestDisabledAllocatesNothing(t *testing.T) {
	tel := disabled(t)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		rctx, s := tel.StartRequest(ctx, benchReq)
		_, n := tel.StartNested(rctx, "bash")
		n.End(telemetry.Outcome{})
		s.End(telemetry.Outcome{ErrorType: telemetry.ToolError})
		tel.SessionOpened()
		tel.SessionClosed()
	})
	if allocs != 0 {
		t.Errorf("disabled path allocates %v times per call; want 0", allocs)
	}
	if rctx, s := tel.StartRequest(ctx, benchReq); rctx != ctx || s != nil {
		t.Errorf("disabled StartRequest = %v, %v; want ctx, nil", rctx, s)
	}
}

func BenchmarkStartRequest(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, tel *telemetry.Telemetry) {
		b.ReportAllocs()
		for b.Loop() {
			rctx, s := tel.StartRequest(ctx, benchReq)
			_, n := tel.StartNested(rctx, "bash")
			n.End(telemetry.Outcome{})
			s.End(telemetry.Outcome{})
		}
	}
	b.Run("disabled", func(b *testing.B) { run(b, disabled(b)) })
	b.Run("metrics", func(b *testing.B) {
		tel, err := telemetry.New(&telemetry.Options{Getenv: noenv, Metrics: true})
		if err != nil {
			b.Fatal(err)
		}
		run(b, tel)
	})
	b.Run("traced", func(b *testing.B) {
		// A real SDK provider with a no-op processor: the cost of creating
		// and ending recorded spans, without export.
		tp := sdktrace.NewTracerProvider()
		defer tp.Shutdown(context.Background())
		tel, err := telemetry.New(&telemetry.Options{Getenv: noenv, TracerProvider: tp, Metrics: true})
		if err != nil {
			b.Fatal(err)
		}
		run(b, tel)
	})
}

func mustTraceID(s string) trace.TraceID {
	id, err := trace.TraceIDFromHex(s)
	if err != nil {
		panic(err)
	}
	return id
}

func mustSpanID(s string) trace.SpanID {
	id, err := trace.SpanIDFromHex(s)
	if err != nil {
		panic(err)
	}
	return id
}

// TestContextWith checks that a span handed around outside its ctx (as
// mcp-go's hooks must) still parents the work done under ContextWith.
func TestContextWith(t *testing.T) {
	tel, rec := newRecorded(t, false)
	ctx := context.Background()
	_, span := tel.StartRequest(ctx, telemetry.Request{Method: "tools/call", Tool: "run_code"})
	_, nested := tel.StartNested(span.ContextWith(ctx), "fs.read")
	nested.End(telemetry.Outcome{})
	span.End(telemetry.Outcome{})
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("ended spans = %d; want 2", len(ended))
	}
	if ended[0].Parent().SpanID() != ended[1].SpanContext().SpanID() {
		t.Errorf("nested parent = %s; want the request's span %s", ended[0].Parent().SpanID(), ended[1].SpanContext().SpanID())
	}
	var none *telemetry.Span
	if got := none.ContextWith(ctx); got != ctx {
		t.Errorf("nil ContextWith = %v; want ctx unchanged", got)
	}
}

func TestEnabled(t *testing.T) {
	tracing, _ := newRecorded(t, false)
	metricsOnly, err := telemetry.New(&telemetry.Options{Getenv: noenv, Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		tel  *telemetry.Telemetry
		want bool
	}{{"nil", nil, false}, {"disabled", disabled(t), false}, {"tracing", tracing, true}, {"metrics", metricsOnly, true}} {
		if got := tt.tel.Enabled(); got != tt.want {
			t.Errorf("%s: Enabled = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestStatusMessageBounded checks that a huge error text is cut on the
// span, on a rune boundary.
func TestStatusMessageBounded(t *testing.T) {
	tel, rec := newRecorded(t, false)
	_, span := tel.StartRequest(context.Background(), telemetry.Request{Method: "tools/call", Tool: "bash"})
	span.End(telemetry.Outcome{ErrorType: telemetry.ToolError, Message: "x" + strings.Repeat("é", 1000)})
	got := onlySpan(t, rec).Status().Description
	if want := "x" + strings.Repeat("é", 127) + "…"; got != want {
		t.Errorf("status = %q (%d bytes); want %q", got, len(got), want)
	}
}
