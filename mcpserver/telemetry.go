package mcpserver

import (
	"context"
	"errors"
	"strconv"

	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/bubbuild/bub-mcp/telemetry"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Tracing and metrics ride on mcp-go's own hooks, which fire for every
// request of every era and transport inside HandleMessage: BeforeAny
// starts the request's span, OnSuccess or OnError ends it (mcp-go
// guarantees exactly one of them per BeforeAny). Hooks cannot hand the
// handler a new ctx, so the span waits on the per-request state both
// transports already put in ctx (request.memo.span), and handle makes it the
// parent of the call (withSpan). Without telemetry none of this is
// installed: a server without it runs exactly the hooks it ran before.
//
// Not traced: notifications, methods mcp-go does not know (answered
// before any hook) and requests our transports refuse before
// HandleMessage (pre-initialize, over a bound, a rejected requestState);
// they are in the transport's logs instead.

// addTelemetry installs the hooks that trace and measure requests and
// count sessions.
func addTelemetry(hooks *server.Hooks, tel *telemetry.Telemetry) {
	hooks.AddBeforeAny(func(ctx context.Context, id any, method mcp.MCPMethod, message any) {
		r := requestFrom(ctx)
		if r == nil {
			return
		}
		_, span := tel.StartRequest(ctx, telemetryRequest(ctx, r, id, method, message))
		r.memo.span.Store(span)
	})
	hooks.AddOnSuccess(func(ctx context.Context, id any, method mcp.MCPMethod, message any, result any) {
		span := takeSpan(ctx)
		var o telemetry.Outcome
		if res, ok := result.(*mcp.CallToolResult); ok && res != nil && res.IsError {
			o = telemetry.Outcome{ErrorType: telemetry.ToolError, Message: toolErrorMessage(res)}
		}
		span.End(o)
	})
	hooks.AddOnError(func(ctx context.Context, id any, method mcp.MCPMethod, message any, err error) {
		span := takeSpan(ctx)
		if span == nil {
			// mcp-go refused the request before BeforeAny (unparsable
			// params, a capability not offered): it still gets a span, so
			// protocol errors are never invisible.
			r := requestFrom(ctx)
			if r == nil {
				return
			}
			_, span = tel.StartRequest(ctx, telemetryRequest(ctx, r, id, method, message))
		}
		span.End(rpcOutcome(err))
	})
	hooks.AddOnRegisterSession(func(context.Context, server.ClientSession) { tel.SessionOpened() })
	hooks.AddOnUnregisterSession(func(context.Context, server.ClientSession) { tel.SessionClosed() })
}

// telemetryRequest describes one request for its span.
func telemetryRequest(ctx context.Context, r *request, id any, method mcp.MCPMethod, message any) telemetry.Request {
	req := telemetry.Request{
		Method:          string(method),
		RequestID:       requestID(id),
		ProtocolVersion: server.RequestProtocolVersion(ctx),
		Header:          r.header,
		Transport:       telemetry.TransportTCP,
	}
	if req.ProtocolVersion == "" && r.header != nil {
		// mcp-go's HTTP sessions do not remember the negotiated version;
		// 2025 clients repeat it on every request after initialize.
		req.ProtocolVersion = r.header.Get("Mcp-Protocol-Version")
	}
	if r.caller.Transport == "stdio" {
		req.Transport = telemetry.TransportPipe
	}
	if sess := server.ClientSessionFromContext(ctx); sess != nil && !server.IsModernRequest(ctx) {
		// The 2026-07-28 protocol has no sessions; what mcp-go keeps for
		// such a request (a stdio connection's id) is not one.
		req.SessionID = sess.SessionID()
	}
	if call, ok := message.(*mcp.CallToolRequest); ok {
		req.Tool = call.Params.Name
		if call.Params.Meta != nil {
			req.Meta = call.Params.Meta.AdditionalFields
		}
	}
	return req
}

// takeSpan removes the span of ctx's request, so it is ended once.
func takeSpan(ctx context.Context) *telemetry.Span {
	if r := requestFrom(ctx); r != nil {
		return r.memo.span.Swap(nil)
	}
	return nil
}

// withSpan returns ctx with its request's span as the current one, so the
// call's nested work and logs belong to the request's trace.
func withSpan(ctx context.Context) context.Context {
	if r := requestFrom(ctx); r != nil {
		return r.memo.span.Load().ContextWith(ctx)
	}
	return ctx
}

// requestID renders a JSON-RPC id as the conventions record it. mcp-go
// decodes numbers as float64; an id too large for one travels through
// mcp-go as a string (see serveBigID) and is recorded with its digits.
func requestID(id any) string {
	switch v := id.(type) {
	case string:
		return mcpgofix.TokenID(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case mcp.RequestId:
		return requestID(v.Value())
	}
	return ""
}

// rpcOutcome is the outcome of a request answered with err: its JSON-RPC
// code when mcp-go attached one, else internal error.
func rpcOutcome(err error) telemetry.Outcome {
	var rpc interface{ ToJSONRPCError() mcp.JSONRPCError }
	if errors.As(err, &rpc) {
		e := rpc.ToJSONRPCError().Error
		return telemetry.RPCError(e.Code, e.Message)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return telemetry.RPCError(mcp.INTERNAL_ERROR, msg)
}

// toolErrorMessage is an isError result's first text (telemetry bounds
// it on the span).
func toolErrorMessage(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}
