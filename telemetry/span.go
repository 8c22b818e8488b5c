package telemetry

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys and values of the MCP semantic conventions. They are
// written out rather than taken from a semconv package because the MCP ones
// live in the GenAI registry, which has no Go package, and a semconv import
// would pin a schema URL that can conflict with the SDK's resource.
const (
	keyMethod          = attribute.Key("mcp.method.name")
	keySession         = attribute.Key("mcp.session.id")
	keyProtocolVersion = attribute.Key("mcp.protocol.version")
	keyTool            = attribute.Key("gen_ai.tool.name")
	keyOperation       = attribute.Key("gen_ai.operation.name")
	keyRequestID       = attribute.Key("jsonrpc.request.id")
	keyErrorType       = attribute.Key("error.type")
	keyStatusCode      = attribute.Key("rpc.response.status_code")
	keyTransport       = attribute.Key("network.transport")
	keyProtocolName    = attribute.Key("network.protocol.name")

	methodToolsCall = "tools/call"
	opExecuteTool   = "execute_tool"
)

// Error types for [Outcome.ErrorType] that are not JSON-RPC codes.
const (
	// ToolError is the error.type of a tools/call whose result has isError
	// set: the JSON-RPC call succeeded but the tool failed. The conventions
	// name this value; without it tool failures would look like successes.
	ToolError = "tool_error"

	// OtherError is the conventions' fallback error.type for a failure that
	// has no better low-cardinality name.
	OtherError = "_OTHER"
)

// Transports for [Request.Transport], the network.transport values the
// conventions prescribe.
const (
	TransportPipe = "pipe" // stdio
	TransportTCP  = "tcp"  // streamable HTTP
)

// Request describes one MCP request or notification as it arrives.
type Request struct {
	// Method is mcp.method.name, such as "tools/call" or "initialize".
	Method string
	// Tool is gen_ai.tool.name for tools/call; "" otherwise.
	Tool string
	// SessionID is mcp.session.id; "" for sessionless requests.
	SessionID string
	// RequestID is the JSON-RPC id as a string; "" for a notification or a
	// null id, which the conventions say not to record.
	RequestID string
	// ProtocolVersion is the negotiated MCP version, such as "2025-06-18".
	ProtocolVersion string
	// Transport is network.transport: TransportPipe or TransportTCP.
	Transport string
	// Meta is the request's params._meta. Its traceparent, tracestate and
	// baggage keys, when present, give the span its parent.
	Meta map[string]any
	// Header holds the HTTP request's headers (nil for stdio). Its W3C trace
	// headers are the parent when Meta carries none.
	Header http.Header
}

// Outcome is how an operation ended. The zero Outcome is success.
type Outcome struct {
	// ErrorType is error.type: "" for success, ToolError for a tool result
	// with isError, the JSON-RPC error code in decimal for a protocol error
	// (see RPCError), or another low-cardinality class such as OtherError.
	// It becomes a metric label, so it must never carry free text.
	ErrorType string
	// Message describes the error on the span status (the JSON-RPC error
	// message, as the conventions ask), cut to its first 256 bytes. It
	// never reaches metrics.
	Message string
}

// RPCError is the Outcome of a request answered with a JSON-RPC error.
func RPCError(code int, message string) Outcome {
	return Outcome{ErrorType: strconv.Itoa(code), Message: message}
}

// Span is one operation in flight: an MCP request or a nested tool call. A
// nil *Span is valid and does nothing, which is what the disabled path
// returns. End it exactly once; later Ends are ignored.
type Span struct {
	t      *Telemetry
	span   trace.Span // nil when tracing is off
	start  time.Time  // zero when metrics are off
	method string
	tool   string
	nested bool
	ended  atomic.Bool
}

// StartRequest starts the server span of an MCP request and returns a ctx
// that carries it, for the handler and every nested call. The parent is the
// trace context in req.Meta; failing that, the span ctx already holds (HTTP
// middleware's, which is closer than the headers it was made from); failing
// that, the one in req.Header. When the parent comes from Meta, the
// transport's own context (ctx's span or the headers) is linked instead, as
// the conventions recommend: one MCP request may span several HTTP requests.
//
// With tracing and metrics both off it returns ctx and a nil *Span and
// allocates nothing.
func (t *Telemetry) StartRequest(ctx context.Context, req Request) (context.Context, *Span) {
	if t == nil || (!t.tracing && t.metrics == nil) {
		return ctx, nil
	}
	s := &Span{t: t, method: req.Method, tool: req.Tool}
	if t.tracing {
		ctx, s.span = t.startServerSpan(ctx, &req)
	}
	t.begin(s)
	return ctx, s
}

// StartNested starts the span of a tool call made from inside another one,
// such as `await tools.fs_read(...)` in run_code, as a child of the span in
// ctx (the caller's). It follows the GenAI execute_tool span (kind internal,
// name "execute_tool {tool}"), since a nested call is not an MCP message.
// Nested calls count in the tool-call metrics with mode="nested" but not in
// mcp.server.operation.duration, whose requests already include them.
func (t *Telemetry) StartNested(ctx context.Context, tool string) (context.Context, *Span) {
	if t == nil || (!t.tracing && t.metrics == nil) {
		return ctx, nil
	}
	s := &Span{t: t, tool: tool, nested: true}
	if t.tracing {
		ctx, s.span = t.tracer.Start(ctx, opExecuteTool+" "+tool,
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(keyOperation.String(opExecuteTool), keyTool.String(tool)),
		)
	}
	t.begin(s)
	return ctx, s
}

func (t *Telemetry) startServerSpan(ctx context.Context, req *Request) (context.Context, trace.Span) {
	var links []trace.Link
	ambient := trace.SpanContextFromContext(ctx)
	parent, fromMeta := ctx, false
	if hasTraceparent(req.Meta) {
		if mctx := t.propagator.Extract(ctx, metaCarrier(req.Meta)); trace.SpanContextFromContext(mctx).IsValid() {
			parent, fromMeta = mctx, true
			// The transport's context, if any, becomes a link.
			transport := ambient
			if !transport.IsValid() && req.Header != nil {
				transport = trace.SpanContextFromContext(t.propagator.Extract(ctx, propagation.HeaderCarrier(req.Header)))
			}
			if transport.IsValid() && !transport.Equal(trace.SpanContextFromContext(mctx)) {
				links = append(links, trace.Link{SpanContext: transport})
			}
		}
	}
	if !fromMeta && !ambient.IsValid() && req.Header != nil {
		// With no span in ctx yet, nothing has read the headers: they are
		// the parent. A span already in ctx (HTTP middleware's) is closer.
		parent = t.propagator.Extract(ctx, propagation.HeaderCarrier(req.Header))
	}
	ctx = parent

	name := req.Method
	if req.Tool != "" {
		name += " " + req.Tool
	}
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, keyMethod.String(req.Method))
	if req.Tool != "" {
		attrs = append(attrs, keyTool.String(req.Tool))
	}
	if req.Method == methodToolsCall {
		attrs = append(attrs, keyOperation.String(opExecuteTool))
	}
	if req.SessionID != "" {
		attrs = append(attrs, keySession.String(req.SessionID))
	}
	if req.RequestID != "" {
		attrs = append(attrs, keyRequestID.String(req.RequestID))
	}
	if req.ProtocolVersion != "" {
		attrs = append(attrs, keyProtocolVersion.String(req.ProtocolVersion))
	}
	if req.Transport != "" {
		attrs = append(attrs, keyTransport.String(req.Transport))
	}
	if req.Header != nil {
		attrs = append(attrs, keyProtocolName.String("http"))
	}
	return t.tracer.Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrs...),
		trace.WithLinks(links...),
	)
}

// begin records the start of s in the metrics.
func (t *Telemetry) begin(s *Span) {
	if t.metrics == nil {
		return
	}
	s.start = t.now()
	t.metrics.begin(s)
}

// End ends the span with outcome o and records the operation's metrics.
// On failure it sets error.type, rpc.response.status_code for a JSON-RPC
// code, and an error status with o.Message.
func (s *Span) End(o Outcome) {
	if s == nil || !s.ended.CompareAndSwap(false, true) {
		return
	}
	if s.span != nil {
		if o.ErrorType != "" {
			attrs := []attribute.KeyValue{keyErrorType.String(o.ErrorType)}
			if isRPCCode(o.ErrorType) {
				attrs = append(attrs, keyStatusCode.String(o.ErrorType))
			}
			s.span.SetAttributes(attrs...)
			s.span.SetStatus(codes.Error, statusMessage(o.Message))
		}
		s.span.End()
	}
	if m := s.t.metrics; m != nil {
		m.end(s, o.ErrorType, s.t.now().Sub(s.start).Seconds())
	}
}

// ContextWith returns ctx carrying s's trace span, so work started under
// it (nested calls, log records) belongs to s's trace. It is for callers
// that got s somewhere other than from StartRequest's ctx: mcp-go's hooks
// start a request's span but cannot hand the handler a new ctx. With
// tracing off, or on a nil *Span, it returns ctx.
func (s *Span) ContextWith(ctx context.Context) context.Context {
	if s == nil || s.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, s.span)
}

// maxStatusMessage bounds a span's status description: a failing tool may
// return megabytes of text, and the span needs only the gist.
const maxStatusMessage = 256

// statusMessage is msg cut to maxStatusMessage bytes on a rune boundary.
func statusMessage(msg string) string {
	if len(msg) <= maxStatusMessage {
		return msg
	}
	return strings.ToValidUTF8(msg[:maxStatusMessage], "") + "…"
}

// isRPCCode reports whether an error type is a JSON-RPC code: an integer.
func isRPCCode(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// SessionOpened counts a new MCP session in the sessions gauge.
func (t *Telemetry) SessionOpened() {
	if t != nil && t.metrics != nil {
		t.metrics.sessions.Add(1)
	}
}

// SessionClosed uncounts an MCP session; call it once per SessionOpened.
func (t *Telemetry) SessionClosed() {
	if t != nil && t.metrics != nil {
		t.metrics.sessions.Add(-1)
	}
}

// hasTraceparent reports whether meta carries a W3C traceparent.
func hasTraceparent(meta map[string]any) bool {
	v, ok := meta["traceparent"].(string)
	return ok && v != ""
}

// metaCarrier reads W3C trace context from params._meta. Only string values
// count: _meta is client-supplied JSON, and anything else is not a header.
type metaCarrier map[string]any

func (c metaCarrier) Get(key string) string {
	v, _ := c[key].(string)
	return v
}

// Set is never used (the server only extracts) but completes the interface.
func (c metaCarrier) Set(key, value string) { c[key] = value }

func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

var _ propagation.TextMapCarrier = metaCarrier(nil)
