package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// MethodFunc answers one request of a method an Extension adds, for the
// caller conn (unresolved, as ConnectionFromContext gives it). params are
// the request's raw params (nil when it has none); modern says the request
// came on the 2026-07-28 wire. The result is encoded as the JSON-RPC
// result; a *MethodError becomes that JSON-RPC error, any other error an
// internal one.
type MethodFunc func(ctx context.Context, conn *providers.Connection, params json.RawMessage, modern bool) (any, error)

// MethodError is a JSON-RPC error a MethodFunc answers with, such as
// -32602 (mcp.INVALID_PARAMS) for an unknown skill.
type MethodError struct {
	Code    int
	Message string
}

func (e *MethodError) Error() string { return e.Message }

// methods routes the request methods Extensions add.
//
// Workaround: mcp-go v1.2.1 has no way to register a request method (its
// HandleMessage answers -32601 for every method it does not know; custom
// method handlers were proposed in mark3labs/mcp-go PR #580 and closed
// unmerged), so both transports hand these methods here before mcp-go,
// and only these: every method mcp-go knows still goes through it.
// TestExtensionMethods fails without it.
type methods struct {
	funcs  map[string]MethodFunc
	quoted [][]byte // the method names as JSON strings, for mentioned

	// sessions are the 2025-11-25 HTTP sessions mcp-go registered, so an
	// extension method on that wire is answered only within a session
	// that initialized, with its client info in reach.
	sessions sync.Map // session id → server.ClientSession
}

// add collects the Extensions' methods and, when there are any, tracks
// HTTP sessions through hooks.
func (m *methods) add(exts []Extension, hooks *server.Hooks) error {
	for _, e := range exts {
		for name, f := range e.Methods {
			if m.funcs[name] != nil {
				return fmt.Errorf("mcpserver: two extensions serve method %q", name)
			}
			if m.funcs == nil {
				m.funcs = map[string]MethodFunc{}
			}
			m.funcs[name] = f
			q, _ := json.Marshal(name)
			m.quoted = append(m.quoted, q)
		}
	}
	if m.funcs == nil {
		return nil
	}
	hooks.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) {
		m.sessions.Store(s.SessionID(), s)
	})
	hooks.AddOnUnregisterSession(func(ctx context.Context, s server.ClientSession) {
		m.sessions.Delete(s.SessionID())
	})
	return nil
}

// mentioned reports, without decoding it, whether msg may be a request
// of one of the methods: it holds a method's name in quotes. Most
// requests are not, and are left to mcp-go without a second decode.
func (m *methods) mentioned(msg []byte) bool {
	for _, q := range m.quoted {
		if bytes.Contains(msg, q) {
			return true
		}
	}
	return false
}

// lookup returns the function serving method, or nil.
func (m *methods) lookup(method string) MethodFunc {
	if m.funcs == nil {
		return nil
	}
	return m.funcs[method]
}

// methodRequest is what serving an extension method reads of a request.
type methodRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// answer runs f for the request in msg and returns its JSON-RPC answer,
// with the request's id exactly as sent. A panic in f is an internal
// error for this request.
func (s *Server) answer(ctx context.Context, f MethodFunc, msg []byte) (resp mcp.JSONRPCMessage) {
	var req methodRequest
	if err := json.Unmarshal(msg, &req); err != nil {
		return rpcError(nil, mcp.PARSE_ERROR, "Parse error")
	}
	// The id first: no answer echoes one that is no string or integer.
	if valid, _ := idKind(req.ID); !valid {
		return rpcError(nil, mcp.INVALID_REQUEST, errOddID.Error())
	}
	if req.JSONRPC != mcp.JSONRPC_VERSION {
		return rpcError(req.ID, mcp.INVALID_REQUEST, "Invalid JSON-RPC version")
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.ErrorContext(ctx, "mcp.method.panic", "method", req.Method, "panic", r)
			resp = rpcError(req.ID, mcp.INTERNAL_ERROR, fmt.Sprintf("internal error: %v", r))
		}
	}()
	if bytes.Equal(bytes.TrimSpace(req.Params), []byte("null")) {
		req.Params = nil
	}
	result, err := f(ctx, ConnectionFromContext(ctx), req.Params, mcp.IsModernProtocol(metaVersion(req.Params)))
	if err != nil {
		if me, ok := errors.AsType[*MethodError](err); ok {
			return rpcError(req.ID, me.Code, me.Message)
		}
		return rpcError(req.ID, mcp.INTERNAL_ERROR, err.Error())
	}
	b, err := json.Marshal(result)
	if err != nil {
		return rpcError(req.ID, mcp.INTERNAL_ERROR, fmt.Sprintf("encoding the %s result: %v", req.Method, err))
	}
	return rawResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: b}
}

// rawResponse is a JSON-RPC response whose id and result are already
// encoded.
type rawResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
}

// metaVersion is the protocol version a 2026-07-28 request declares in
// its params' _meta, or "".
func metaVersion(params json.RawMessage) string {
	if len(params) == 0 {
		return ""
	}
	var p struct {
		Meta struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Meta.Version
}

// serveMethodHTTP answers a POST of an extension method and reports
// whether it did. On the 2026-07-28 wire the Mcp-Method header must name
// the body's method (else mcp-go refuses the mismatch itself); on the
// 2025-11-25 wire (session) the session must be one mcp-go registered
// (else mcp-go answers the request as it would any other). Errors get the
// HTTP status the 2026-07-28 protocol gives their code.
func (s *Server) serveMethodHTTP(w http.ResponseWriter, r *http.Request, rq *request, session bool) bool {
	body := bodyBytes(r)
	modern := r.Header.Get("Mcp-Protocol-Version") == modernProtocol
	var method string
	switch {
	case modern:
		method = r.Header.Get(mcp.HeaderMethod)
		if s.methods.lookup(method) == nil {
			return false
		}
	case session && s.methods.mentioned(body):
	default:
		return false
	}
	var env struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &env) != nil || (modern && env.Method != method) {
		return false // mcp-go refuses it, or the header's mismatch
	}
	f := s.methods.lookup(env.Method)
	if f == nil {
		return false
	}
	ctx := withRequest(r.Context(), rq)
	if !modern {
		sess, ok := s.methods.sessions.Load(r.Header.Get("Mcp-Session-Id"))
		if !ok {
			return false
		}
		ctx = s.mcp.WithContext(ctx, sess.(server.ClientSession))
	}
	resp := s.answer(ctx, f, body)
	status := http.StatusOK
	if e, ok := resp.(mcp.JSONRPCError); ok && modern {
		status = modernErrorStatus(e.Error.Code)
	}
	b, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return true
}

// modernErrorStatus is the HTTP status the 2026-07-28 protocol gives a
// JSON-RPC error code, as mcp-go maps it for the methods it serves.
func modernErrorStatus(code int) int {
	switch code {
	case mcp.METHOD_NOT_FOUND:
		return http.StatusNotFound
	case mcp.INVALID_REQUEST, mcp.INVALID_PARAMS, mcp.PARSE_ERROR:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
