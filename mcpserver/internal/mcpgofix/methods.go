package mcpgofix

// Defect: mcp-go v1.2.1 has no way to register a request method: its
// HandleMessage answers -32601 for every method it does not know, so an
// MCP extension's methods (SEP-2640's skills/list, skills/get) cannot be
// served through it.
// Upstream: custom method handlers were proposed in mark3labs/mcp-go PR
// #580 and closed unmerged; no open issue as of 2026-12.
// Test: TestExtensionMethods.
// Delete when: mcp-go can register a request method (then each Method
// becomes one registration).
//
// The repair: the edge hands the requests of these methods, and only
// these, to Methods before mcp-go; every method mcp-go knows still goes
// through it. On the 2025-11-25 HTTP wire such a request is answered only
// within a session mcp-go registered, whose client info stays in reach.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Method answers one request: params are its raw params (nil when it has
// none), modern says it came on the 2026-07-28 wire. The result is
// encoded as the JSON-RPC result; a *MethodError becomes that JSON-RPC
// error, any other error an internal one.
type Method func(ctx context.Context, params json.RawMessage, modern bool) (any, error)

// MethodError is a JSON-RPC error a Method answers with.
type MethodError struct {
	Code    int
	Message string
}

func (e *MethodError) Error() string { return e.Message }

// Methods routes the request methods mcp-go does not know.
type Methods struct {
	funcs    map[string]Method
	sessions sync.Map // 2025-11-25 HTTP session id → server.ClientSession
}

// Add serves name with f; a name served twice is an error.
func (m *Methods) Add(name string, f Method) error {
	if m.funcs[name] != nil {
		return fmt.Errorf("two extensions serve method %q", name)
	}
	if m.funcs == nil {
		m.funcs = map[string]Method{}
	}
	m.funcs[name] = f
	return nil
}

// Track keeps the HTTP sessions mcp-go registers, when there are methods.
func (m *Methods) Track(hooks *server.Hooks) {
	if m.funcs == nil {
		return
	}
	hooks.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) {
		m.sessions.Store(s.SessionID(), s)
	})
	hooks.AddOnUnregisterSession(func(ctx context.Context, s server.ClientSession) {
		m.sessions.Delete(s.SessionID())
	})
}

// Lookup returns the function serving method, or nil.
func (m *Methods) Lookup(method string) Method {
	if m.funcs == nil {
		return nil
	}
	return m.funcs[method]
}

// Session returns the registered 2025 HTTP session with id.
func (m *Methods) Session(id string) (server.ClientSession, bool) {
	s, ok := m.sessions.Load(id)
	if !ok {
		return nil, false
	}
	return s.(server.ClientSession), true
}

// methodRequest is what serving a method reads of a request.
type methodRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// Answer runs f for the request in msg and returns its JSON-RPC answer,
// with the request's id exactly as sent. A panic in f is an internal
// error for this request.
func Answer(ctx context.Context, log *slog.Logger, f Method, msg []byte) (resp mcp.JSONRPCMessage) {
	var req methodRequest
	if err := json.Unmarshal(msg, &req); err != nil {
		return RPCError(nil, mcp.PARSE_ERROR, "Parse error")
	}
	// The id first: no answer echoes one that is no string or integer.
	if valid, _ := IDKind(req.ID); !valid {
		return RPCError(nil, mcp.INVALID_REQUEST, ErrOddID.Error())
	}
	if req.JSONRPC != mcp.JSONRPC_VERSION {
		return RPCError(req.ID, mcp.INVALID_REQUEST, "Invalid JSON-RPC version")
	}
	defer func() {
		if r := recover(); r != nil {
			log.ErrorContext(ctx, "mcp.method.panic", "method", req.Method, "panic", r)
			resp = RPCError(req.ID, mcp.INTERNAL_ERROR, fmt.Sprintf("internal error: %v", r))
		}
	}()
	if bytes.Equal(bytes.TrimSpace(req.Params), []byte("null")) {
		req.Params = nil
	}
	result, err := f(ctx, req.Params, mcp.IsModernProtocol(metaVersion(req.Params)))
	if err != nil {
		if me, ok := errors.AsType[*MethodError](err); ok {
			return RPCError(req.ID, me.Code, me.Message)
		}
		return RPCError(req.ID, mcp.INTERNAL_ERROR, err.Error())
	}
	b, err := json.Marshal(result)
	if err != nil {
		return RPCError(req.ID, mcp.INTERNAL_ERROR, fmt.Sprintf("encoding the %s result: %v", req.Method, err))
	}
	return rawResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: b}
}

// rawResponse is a JSON-RPC response whose id and result are encoded.
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

// WriteHTTP writes a method's answer to a POST: errors get the HTTP
// status the 2026-07-28 protocol gives their code, as mcp-go maps it for
// the methods it serves.
func WriteHTTP(w http.ResponseWriter, resp mcp.JSONRPCMessage, modern bool) {
	status := http.StatusOK
	if e, ok := resp.(mcp.JSONRPCError); ok && modern {
		switch e.Error.Code {
		case mcp.METHOD_NOT_FOUND:
			status = http.StatusNotFound
		case mcp.INVALID_REQUEST, mcp.INVALID_PARAMS, mcp.PARSE_ERROR:
			status = http.StatusBadRequest
		}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
