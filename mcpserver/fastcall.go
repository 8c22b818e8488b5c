package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The fast path. A tools/call of the sessionless 2026-07-28 protocol is
// most of an HTTP server's traffic, and mcp-go spends most of its time per
// call around the tool, not in it: it decodes the same body seven times
// (era detection, routing, protocol info, trace context, header checks,
// the request itself), builds an ephemeral session with a notification
// forwarder goroutine, and reflects over the result to decorate it. For
// the common case, a call that needs none of what that machinery is for,
// fastCall does the same work directly: it checks the request as mcp-go
// would (headers against body, protocol version, client capabilities),
// runs the tool through the same handler, and writes the same response,
// byte for byte (TestFastCallMatchesMCPGo). Anything else goes to mcp-go
// untouched: another method or protocol era, a progress token or log
// level (notifications would need an SSE stream), multi-round-trip or task
// parameters, a tool outside the caller's View or with x-mcp-header
// bindings, and any request the checks would reject, so every error
// response stays mcp-go's.

// fastParams is what fastCall reads of a tools/call's params.
type fastParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	Meta           *mcp.Meta       `json:"_meta"`
	Task           json.RawMessage `json:"task"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
}

// fastCall serves r if it can (see above) and reports whether it did.
// When it did not, r.Body still reads the whole body.
func (s *Server) fastCall(w http.ResponseWriter, r *http.Request, st *httpRequest, supports func(string) bool) bool {
	if s.noFast {
		return false
	}
	h := r.Header
	version := h.Get(mcp.HeaderProtocolVersion)
	if !mcp.IsModernProtocol(version) || !supports(version) ||
		h.Get(mcp.HeaderMethod) != string(mcp.MethodToolsCall) || h.Get(mcp.HeaderLastEventID) != "" {
		return false
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != mcp.JSONRPC_VERSION || msg.Method != string(mcp.MethodToolsCall) {
		return false
	}
	var id any
	if json.Unmarshal(msg.ID, &id) != nil || id == nil {
		return false
	}
	switch id.(type) {
	case string, float64:
	default:
		return false
	}
	var p fastParams
	if json.Unmarshal(msg.Params, &p) != nil || p.Meta == nil || p.Task != nil || p.InputResponses != nil || p.RequestState != nil {
		return false
	}
	caps := p.Meta.ClientCapabilities()
	if p.Meta.ProtocolVersion() != version || caps == nil || p.Meta.ProgressToken != nil || p.Meta.LogLevel() != "" {
		return false
	}
	if mcp.ValidateStandardHeaders(h.Get, version, mcp.MethodToolsCall, msg.Params) != nil {
		return false
	}
	var args any
	if len(p.Arguments) > 0 && json.Unmarshal(p.Arguments, &args) != nil {
		return false
	}

	info := &server.RequestProtocolInfo{Modern: true, ProtocolVersion: version, ClientInfo: p.Meta.ClientInfo(), ClientCapabilities: caps}
	sess := &fastSession{}
	if info.ClientInfo != nil {
		sess.info = *info.ClientInfo
	}
	sess.caps = *caps
	ctx := s.mcp.WithContext(r.Context(), sess)
	ctx = server.WithRequestProtocolInfo(ctx, info)
	ctx = withRequest(ctx, &st.request)
	_, v, err := s.resolve(ctx)
	if err != nil {
		return false
	}
	tool, ok := v.Lookup(p.Name)
	if !ok || s.headerBound[tool.ModelName()] {
		return false
	}

	// From here on the request is ours.
	s.fastServed.Add(1)
	req := mcp.CallToolRequest{}
	req.Method = string(mcp.MethodToolsCall)
	req.Params.Name = p.Name
	req.Params.Meta = p.Meta
	req.Params.Arguments = args
	if len(p.Arguments) > 0 {
		req.Params.RawArguments = p.Arguments
	}
	req.Header = h
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := s.fastInflight.add(st.caller.Profile, st.caller.Principal, string(msg.ID), cancel)
	defer done()

	var resp mcp.JSONRPCMessage
	res, err := s.safeHandle(ctx, req)
	if err != nil {
		// As mcp-go's WithRecovery and error mapping answer a failed handler.
		resp = mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
			Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, err.Error(), nil)}
	} else {
		res.SetResultType(mcp.ResultTypeComplete)
		if meta := res.EnsureResultMeta(); meta.ServerInfo() == nil {
			meta.SetServerInfo(s.impl)
		}
		resp = mcp.NewJSONRPCResultResponse(mcp.NewRequestId(id), res)
	}
	if ctx.Err() != nil && r.Context().Err() != nil {
		return true // the client is gone
	}
	w.Header().Set("Content-Type", "application/json")
	status := http.StatusOK
	if e, ok := resp.(mcp.JSONRPCError); ok {
		status = httpStatusFor(e.Error.Code)
	}
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(resp); err != nil {
		s.log.Debug("mcp.http.write", "error", err)
	}
	return true
}

// safeHandle runs the tool handler, turning a panic into an error as
// mcp-go's recovery middleware does.
func (s *Server) safeHandle(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("mcp.http.panic", "panic", p)
			res, err = nil, fmt.Errorf("panic recovered in %s tool handler: %v", req.Params.Name, p)
		}
	}()
	return s.handle(ctx, req)
}

// httpStatusFor is the HTTP status protocol version 2026-07-28 gives a
// JSON-RPC error code (as mcp-go maps it).
func httpStatusFor(code int) int {
	switch code {
	case mcp.METHOD_NOT_FOUND:
		return http.StatusNotFound
	case mcp.HEADER_MISMATCH, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, mcp.UNSUPPORTED_PROTOCOL_VERSION,
		mcp.INVALID_REQUEST, mcp.INVALID_PARAMS, mcp.PARSE_ERROR:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// fastSession is the ClientSession of a fast-path call: the client as its
// request's _meta describes it, which is all a sessionless call has. It
// sends nothing (the fast path never serves a call that could notify).
type fastSession struct {
	info mcp.Implementation
	caps mcp.ClientCapabilities
}

func (f *fastSession) SessionID() string                                   { return "" }
func (f *fastSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }
func (f *fastSession) Initialize()                                         {}
func (f *fastSession) Initialized() bool                                   { return true }
func (f *fastSession) GetClientInfo() mcp.Implementation                   { return f.info }
func (f *fastSession) SetClientInfo(info mcp.Implementation)               { f.info = info }
func (f *fastSession) GetClientCapabilities() mcp.ClientCapabilities       { return f.caps }
func (f *fastSession) SetClientCapabilities(c mcp.ClientCapabilities)      { f.caps = c }

var _ server.SessionWithClientInfo = (*fastSession)(nil)

// fastCalls tracks fast-path calls so notifications/cancelled reaches
// them: mcp-go only knows the calls it runs. A sessionless call is named by
// its caller (profile, principal) and JSON-RPC id.
type fastCalls struct {
	mu    sync.Mutex
	calls map[fastKey][]*fastCall
}

type fastKey struct{ profile, principal, id string }

type fastCall struct{ cancel context.CancelFunc }

func (f *fastCalls) add(profile, principal, id string, cancel context.CancelFunc) (done func()) {
	k, c := fastKey{profile, principal, id}, &fastCall{cancel}
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[fastKey][]*fastCall{}
	}
	f.calls[k] = append(f.calls[k], c)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		l := f.calls[k]
		for i := range l {
			if l[i] == c {
				l[i] = l[len(l)-1]
				l = l[:len(l)-1]
				break
			}
		}
		if len(l) == 0 {
			delete(f.calls, k)
		} else {
			f.calls[k] = l
		}
	}
}

// cancel cancels the caller's fast-path calls with the given id.
func (f *fastCalls) cancel(profile, principal, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls[fastKey{profile, principal, id}] {
		c.cancel()
	}
}

// noteCancellation passes a modern notifications/cancelled on to the
// fast-path call it names, if one runs. r.Body still reads the whole body
// afterwards.
func (s *Server) noteCancellation(r *http.Request, st *httpRequest) {
	if r.Header.Get(mcp.HeaderMethod) != "notifications/cancelled" {
		return
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return
	}
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &n) == nil && len(n.Params.RequestID) > 0 {
		s.fastInflight.cancel(st.caller.Profile, st.caller.Principal, string(n.Params.RequestID))
	}
}
