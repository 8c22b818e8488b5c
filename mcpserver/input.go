package mcpserver

// Multi-round-trip input (SEP-2322, protocol 2026-07-28). The sessionless
// wire has no server-to-client requests: a tool that asks the client
// (tc.Sample, tc.Elicit, tc.Roots) gets its answer only if the request
// already carries it. Otherwise the question is recorded, the ask fails,
// and the call is answered with an InputRequiredResult listing every
// question the run asked. The client answers and retries; the tool runs
// again from the start, and this time its asks return the answers.
//
// Answers of earlier rounds travel in requestState, sealed with
// HMAC-SHA256 and bound to the caller, the tool and its arguments, so any
// replica holding the key can resume the call and nobody can forge or
// move one. A tool therefore should ask before it acts, or act
// idempotently: each round re-runs what precedes its questions.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/internal/statekey"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/edge"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// stateTTL is how long a requestState stays valid: long enough for a
// person to answer, short enough that an old answer is not replayed.
const stateTTL = 30 * time.Minute

// maxInputRequests bounds the questions one round may ask.
const maxInputRequests = 32

// errInputPending is what an ask returns when the request does not yet
// carry its answer; the call then ends with an InputRequiredResult.
var errInputPending = errors.New("waiting for the client's answer (multi-round-trip input request)")

// errStateInvalid marks a requestState that fails verification.
var errStateInvalid = errors.New("invalid requestState")

// sealedState is the payload of a requestState.
type sealedState struct {
	V       int                    `json:"v"`
	Tool    string                 `json:"t"`
	Args    string                 `json:"a"` // hex SHA-256 of the canonical arguments
	Caller  string                 `json:"c"` // profile + principal
	Expires int64                  `json:"e"` // unix seconds
	Asked   map[string]string      `json:"q,omitempty"`
	Answers map[string]sealedInput `json:"r,omitempty"`
}

// sealedInput is one answer, kept as the client sent it.
type sealedInput struct {
	Method string          `json:"m"`
	Raw    json.RawMessage `json:"r"`
}

// sealer seals and opens requestState with one key.
type sealer struct{ key []byte }

func (s sealer) seal(st *sealedState) (string, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("mcpserver: sealing requestState: %w", err)
	}
	mac := hmac.New(sha256.New, s.key)
	mac.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// open verifies and decodes a requestState for tool, args and caller.
func (s sealer) open(token, tool, args, caller string, now time.Time) (*sealedState, error) {
	body, sig, ok := strings.Cut(token, ".")
	if !ok {
		return nil, fmt.Errorf("%w: malformed", errStateInvalid)
	}
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: malformed", errStateInvalid)
	}
	mac := hmac.New(sha256.New, s.key)
	mac.Write(b)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return nil, fmt.Errorf("%w: integrity check failed", errStateInvalid)
	}
	var st sealedState
	if err := json.Unmarshal(b, &st); err != nil || st.V != 1 {
		return nil, fmt.Errorf("%w: unknown format", errStateInvalid)
	}
	switch {
	case now.Unix() > st.Expires:
		return nil, fmt.Errorf("%w: expired; call the tool again without it", errStateInvalid)
	case st.Tool != tool || st.Args != args:
		return nil, fmt.Errorf("%w: it belongs to another call", errStateInvalid)
	case st.Caller != caller:
		return nil, fmt.Errorf("%w: it belongs to another caller", errStateInvalid)
	}
	return &st, nil
}

// argsDigest identifies a call's arguments independently of their
// encoding (key order, spacing), which a client may change between rounds.
func argsDigest(raw json.RawMessage) string {
	var v any
	if len(bytes.TrimSpace(raw)) > 0 && json.Unmarshal(raw, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			raw = b
		}
	}
	if v == nil { // absent, null: the call has no arguments, as "{}"
		raw = []byte("{}")
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}

func callerID(r *request) string {
	if r == nil {
		return ""
	}
	return r.caller.Profile + "\x00" + r.caller.Principal
}

// inputRound is the input state of one modern tools/call: the answers the
// client gave (this request's and earlier rounds') and the questions this
// run asked that lack one.
type inputRound struct {
	caps *mcp.ClientCapabilities

	mu      sync.Mutex
	answers map[string]sealedInput
	asked   mcp.InputRequests
	seq     map[string]int // auto-key counters per kind
}

// newInputRound collects the answers a request carries: those sealed in
// st, and the new ones for the questions st says were asked.
func newInputRound(caps *mcp.ClientCapabilities, st *sealedState, responses mcp.InputResponses) *inputRound {
	// Most calls never ask: the maps are made when needed.
	r := &inputRound{caps: caps}
	if st == nil {
		return r
	}
	r.answers = make(map[string]sealedInput, len(st.Answers)+len(st.Asked))
	for k, a := range st.Answers {
		r.answers[k] = a
	}
	for k, method := range st.Asked {
		resp, ok := responses[k]
		if !ok {
			continue
		}
		raw, err := json.Marshal(resp)
		if err != nil || string(raw) == "null" {
			continue
		}
		r.answers[k] = sealedInput{Method: method, Raw: raw}
	}
	return r
}

// key returns the key of the next question of a kind.
func (r *inputRound) key(kind, given string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seq == nil {
		r.seq = map[string]int{}
	}
	r.seq[kind]++
	if given != "" {
		return given
	}
	return fmt.Sprintf("%s-%d", kind, r.seq[kind])
}

// ask returns the answer to the question under key, or records the
// question and returns errInputPending.
func (r *inputRound) ask(key string, req mcp.InputRequest) (mcp.InputResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.answers[key]; ok && a.Method == string(req.Method) {
		var resp mcp.InputResponse
		if err := json.Unmarshal(a.Raw, &resp); err != nil {
			return mcp.InputResponse{}, fmt.Errorf("mcpserver: answer %q: %w", key, err)
		}
		if err := resp.DecodeFor(req.Method); err != nil {
			return mcp.InputResponse{}, fmt.Errorf("mcpserver: answer %q: %w", key, err)
		}
		return resp, nil
	}
	if r.asked == nil {
		r.asked = mcp.InputRequests{}
	}
	if _, dup := r.asked[key]; !dup && len(r.asked) >= maxInputRequests {
		return mcp.InputResponse{}, fmt.Errorf("mcpserver: a call may ask at most %d questions per round", maxInputRequests)
	}
	r.asked[key] = req
	return mcp.InputResponse{}, errInputPending
}

// pending returns the questions still unanswered.
func (r *inputRound) pending() mcp.InputRequests {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked
}

// result builds the InputRequiredResult for the pending questions, with
// every answer so far sealed into its requestState.
func (r *inputRound) result(s sealer, tool, args, caller string, now time.Time) (*mcp.CallToolResult, error) {
	r.mu.Lock()
	st := &sealedState{V: 1, Tool: tool, Args: args, Caller: caller, Expires: now.Add(stateTTL).Unix(),
		Asked: make(map[string]string, len(r.asked)), Answers: r.answers}
	for k, q := range r.asked {
		st.Asked[k] = string(q.Method)
	}
	requests := r.asked
	r.mu.Unlock()
	token, err := s.seal(st)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		Result:               mcp.Result{ResultType: mcp.ResultTypeInputRequired},
		MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: requests, RequestState: token},
	}, nil
}

// modernInfo returns the request's 2026-07-28 protocol info, or nil on the
// 2025 era.
func modernInfo(ctx context.Context) *server.RequestProtocolInfo {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info
	}
	return nil
}

// hasCapability reports whether caps declares the named client capability.
func hasCapability(caps *mcp.ClientCapabilities, name string) bool {
	if caps == nil {
		return false
	}
	switch name {
	case "sampling":
		return caps.Sampling != nil
	case "elicitation":
		return caps.Elicitation != nil
	case "roots":
		return caps.Roots != nil
	}
	_, ok := caps.Experimental[name]
	return ok
}

// askModern asks the client on the modern wire: the answer if this
// request carries it, else the question is recorded for the
// InputRequiredResult.
func (p *peer) askModern(kind, key string, req mcp.InputRequest) (mcp.InputResponse, error) {
	if p.round == nil {
		return mcp.InputResponse{}, fmt.Errorf("mcpserver: this request cannot ask the client for input")
	}
	if !hasCapability(p.round.caps, kind) {
		return mcp.InputResponse{}, &registry.CapabilityError{Capability: kind}
	}
	return p.round.ask(p.round.key(kind, key), req)
}

// LoadStateKey returns the key that seals requestState: configured (from
// BUB_STATE_KEY or [server] state_key; at least 32 characters), else one
// generated once and kept in home/state.key with mode 0600. Replicas
// behind one load balancer must share it. Package statekey holds the
// source, which the upstream credentials derive their key from too.
func LoadStateKey(configured, home string) ([]byte, error) {
	k, err := statekey.Load(configured, home)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	return k, nil
}

func randomKey() ([]byte, error) {
	k, err := statekey.Random()
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	return k, nil
}

// admission is what admit reads of a request.
type admission struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name         string          `json:"name"`
		Arguments    json.RawMessage `json:"arguments"`
		RequestState string          `json:"requestState"`
		Meta         struct {
			Version string                  `json:"io.modelcontextprotocol/protocolVersion"`
			Caps    *mcp.ClientCapabilities `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	} `json:"params"`
}

// needsAdmission reports whether admit has anything to check in a
// tools/call: it carries a requestState, or names a tool that requires
// client capabilities.
func (s *Server) needsAdmission(env *edge.Envelope) bool {
	if env.Params.RequestState != "" {
		return true
	}
	set := s.served.load()
	if !set.requires {
		return false
	}
	t := set.tools[env.Params.Name]
	return t != nil && len(t.Requires) > 0
}

// admit checks a 2026-07-28 tools/call before dispatch for the refusals
// the spec gives codes that mcp-go cannot return from inside a handler
// (its handler errors all become -32603): a requestState that fails
// verification (-32602) and a tool that needs a client capability the
// request does not declare (-32021, with data.requiredCapabilities). The
// verified state is kept on ctx's request for the handler. Nil means
// dispatch.
func (s *Server) admit(ctx context.Context, msg []byte) *mcp.JSONRPCError {
	r := requestFrom(ctx)
	if r == nil {
		return nil // no caller to bind a requestState to: the handler checks
	}
	var m admission
	if json.Unmarshal(msg, &m) != nil || m.Method != string(mcp.MethodToolsCall) || !mcp.IsModernProtocol(m.Params.Meta.Version) {
		return nil // mcp-go answers malformed and legacy requests itself
	}
	_, v, err := s.resolve(ctx)
	if err != nil {
		return nil
	}
	tool, ok := v.Lookup(m.Params.Name)
	if !ok {
		return nil // mcp-go says "not found", revealing nothing more
	}
	var missing map[string]any
	for _, c := range tool.Requires {
		if !hasCapability(m.Params.Meta.Caps, c) {
			if missing == nil {
				missing = map[string]any{}
			}
			missing[c] = map[string]any{}
		}
	}
	if missing != nil {
		e := edge.RPCError(m.ID, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, fmt.Sprintf("tool %s needs client capabilities the request does not declare", tool.ModelName()))
		e.Error.Data = map[string]any{"requiredCapabilities": missing}
		return &e
	}
	if m.Params.RequestState == "" {
		return nil
	}
	st, err := s.sealer.open(m.Params.RequestState, tool.ModelName(), argsDigest(m.Params.Arguments), callerID(r), time.Now())
	if err != nil {
		e := edge.RPCError(m.ID, mcp.INVALID_PARAMS, err.Error())
		return &e
	}
	r.memo.mu.Lock()
	r.memo.state = st
	r.memo.mu.Unlock()
	return nil
}

// inputState is the requestState admit verified, if any.
func (r *request) inputState() *sealedState {
	if r == nil {
		return nil
	}
	r.memo.mu.Lock()
	defer r.memo.mu.Unlock()
	return r.memo.state
}
