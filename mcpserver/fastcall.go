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

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The fast path. tools/call is most of a server's traffic, and mcp-go
// spends most of its time per call around the tool, not in it: over HTTP
// it decodes the same body seven times (era detection, routing, protocol
// info, trace context, header checks, the request itself), builds an
// ephemeral session with a notification forwarder goroutine, and reflects
// over the result to decorate it. For the common case, a call that needs
// none of what that machinery is for, fastCall (HTTP, sessionless
// protocol) and stdioFast (stdio, both eras) do the same work directly:
// they check the request as mcp-go would (protocol version, client
// capabilities, and over HTTP the headers against the body), run the tool
// through the same handler, and answer as mcp-go would, byte for byte
// (TestFastCallMatchesMCPGo, TestStdioFastCallMatchesMCPGo). Anything else
// goes to mcp-go untouched: other methods, 2025 HTTP sessions,
// multi-round-trip or task parameters, over HTTP a progress token or log
// level (notifications would need an SSE stream), a tool outside the
// caller's View or with x-mcp-header bindings, and any request the checks
// would reject, so every error response stays mcp-go's.

// fastParams is what fastCall reads of a tools/call's params.
type fastParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	Meta           *mcp.Meta       `json:"_meta"`
	Task           json.RawMessage `json:"task"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
}

// fastRequest is a tools/call as the fast path parsed it.
type fastRequest struct {
	id     any // string or float64, as encoding/json decodes it
	rawID  json.RawMessage
	params json.RawMessage
	p      fastParams
	args   any
}

// parseFast parses a tools/call message; ok is false for anything the
// fast path leaves to mcp-go.
func parseFast(body []byte) (fr fastRequest, ok bool) {
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != mcp.JSONRPC_VERSION || msg.Method != string(mcp.MethodToolsCall) {
		return fr, false
	}
	if json.Unmarshal(msg.ID, &fr.id) != nil {
		return fr, false
	}
	switch fr.id.(type) {
	case string, float64:
	default:
		return fr, false
	}
	fr.rawID, fr.params = msg.ID, msg.Params
	p := &fr.p
	if json.Unmarshal(msg.Params, p) != nil || p.Task != nil || p.InputResponses != nil || p.RequestState != nil {
		return fr, false
	}
	if len(p.Arguments) > 0 && json.Unmarshal(p.Arguments, &fr.args) != nil {
		return fr, false
	}
	return fr, true
}

// fastTool reports whether the caller in ctx may call fr's tool on the
// fast path: it is in their View and has no x-mcp-header bindings.
func (s *Server) fastTool(ctx context.Context, fr *fastRequest) bool {
	_, v, err := s.resolve(ctx)
	if err != nil {
		return false
	}
	tool, ok := v.Lookup(fr.p.Name)
	return ok && !s.headerBound[tool.ModelName()]
}

// runFast runs fr through the tool handler and returns its response, as
// mcp-go would answer it (modern results are decorated with resultType and
// the server's identity). caller names the call for notifications/cancelled.
func (s *Server) runFast(ctx context.Context, fr *fastRequest, modern bool, header http.Header, caller *providers.Connection) mcp.JSONRPCMessage {
	s.fastServed.Add(1)
	req := mcp.CallToolRequest{}
	req.Method = string(mcp.MethodToolsCall)
	req.Params.Name = fr.p.Name
	req.Params.Meta = fr.p.Meta
	req.Params.Arguments = fr.args
	if len(fr.p.Arguments) > 0 {
		req.Params.RawArguments = fr.p.Arguments
	}
	req.Header = header
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.fastInflight.add(caller.Profile, caller.Principal, string(fr.rawID), cancel)()

	res, err := s.safeHandle(ctx, req)
	if err != nil {
		// As mcp-go answers a failed handler.
		return mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(fr.id),
			Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, err.Error(), nil)}
	}
	if modern {
		res.SetResultType(mcp.ResultTypeComplete)
		if meta := res.EnsureResultMeta(); meta.ServerInfo() == nil {
			meta.SetServerInfo(s.impl)
		}
	}
	return mcp.NewJSONRPCResultResponse(mcp.NewRequestId(fr.id), res)
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
	fr, ok := parseFast(body)
	if !ok || fr.p.Meta == nil {
		return false
	}
	// Notifications would need an SSE stream: mcp-go's.
	caps := fr.p.Meta.ClientCapabilities()
	if fr.p.Meta.ProtocolVersion() != version || caps == nil || fr.p.Meta.ProgressToken != nil || fr.p.Meta.LogLevel() != "" {
		return false
	}
	if mcp.ValidateStandardHeaders(h.Get, version, mcp.MethodToolsCall, fr.params) != nil {
		return false
	}
	info := &server.RequestProtocolInfo{Modern: true, ProtocolVersion: version, ClientInfo: fr.p.Meta.ClientInfo(), ClientCapabilities: caps}
	sess := &fastSession{caps: *caps}
	if info.ClientInfo != nil {
		sess.info = *info.ClientInfo
	}
	ctx := s.mcp.WithContext(r.Context(), sess)
	ctx = server.WithRequestProtocolInfo(ctx, info)
	ctx = withRequest(ctx, &st.request)
	if !s.fastTool(ctx, &fr) {
		return false
	}

	resp := s.runFast(ctx, &fr, true, h, &st.caller)
	if r.Context().Err() != nil {
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

// stdioFast serves a tools/call line on stdio if it can, in either
// protocol era: as HandleMessage would, a modern request's _meta updates
// the session (client info, capabilities) first. ok is false when mcp-go
// must answer. On stdio a tool's notifications are written directly (see
// peer), so progress tokens and log levels need nothing more.
func (s *Server) stdioFast(ctx context.Context, c *stdioConn, line []byte) (mcp.JSONRPCMessage, bool) {
	if s.noFast {
		return nil, false
	}
	fr, ok := parseFast(line)
	if !ok {
		return nil, false
	}
	info := &server.RequestProtocolInfo{ProtocolVersion: fr.p.Meta.ProtocolVersion()}
	if mcp.IsModernProtocol(info.ProtocolVersion) {
		caps := fr.p.Meta.ClientCapabilities()
		if !mcp.IsValidProtocolVersion(info.ProtocolVersion) || caps == nil {
			return nil, false
		}
		info.Modern, info.ClientInfo, info.ClientCapabilities, info.LogLevel = true, fr.p.Meta.ClientInfo(), caps, fr.p.Meta.LogLevel()
	}
	ctx = server.WithRequestProtocolInfo(ctx, info)
	if !s.fastTool(ctx, &fr) {
		return nil, false
	}
	if info.Modern {
		if info.ClientInfo != nil {
			c.SetClientInfo(*info.ClientInfo)
		}
		c.SetClientCapabilities(*info.ClientCapabilities)
		if !c.Initialized() {
			c.Initialize()
		}
	}
	return s.runFast(ctx, &fr, info.Modern, nil, &c.caller), true
}

// cancelFast cancels the caller's fast-path call that the
// notifications/cancelled in msg names, if one runs; mcp-go cancels the
// calls it runs itself.
func (s *Server) cancelFast(caller *providers.Connection, msg []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) == nil && len(n.Params.RequestID) > 0 {
		s.fastInflight.cancel(caller.Profile, caller.Principal, string(n.Params.RequestID))
	}
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

// noteCancellation hands a modern notifications/cancelled to cancelFast.
// r.Body still reads the whole body afterwards.
func (s *Server) noteCancellation(r *http.Request, st *httpRequest) {
	if r.Header.Get(mcp.HeaderMethod) != "notifications/cancelled" {
		return
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err == nil {
		s.cancelFast(&st.caller, body)
	}
}
