package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// This file is one call of an upstream tool: waiting for the connection,
// the request, cancellation and timeout, and what a failure means.

// errCallTimeout is the cause of a call that ran past its timeout.
var errCallTimeout = errors.New("upstream call timed out")

// call runs one upstream tool for a caller. A principal found signed out
// by the call's own request (a logout elsewhere, while its connection
// was live) is asked to sign in as one without a connection is, and the
// call, which never reached the tool, is made again once.
func (u *upstream) call(ctx context.Context, tc *registry.ToolContext, tool string, args json.RawMessage) (any, error) {
	v, err := u.callOnce(ctx, tc, tool, args)
	var so *signedOut
	if !errors.As(err, &so) {
		return v, err
	}
	u.pool.drop(so.principal) // unused now: the next connection starts over
	if u.cfg.Auth != AuthOAuth || !u.storeHasNone(ctx, so.principal) {
		// The server refused a stored token no refresh helps.
		return nil, u.loginRequired(so.principal)
	}
	if err := u.signIn(ctx, tc, so.principal); err != nil {
		return nil, err
	}
	v, err = u.callOnce(ctx, tc, tool, args)
	if errors.As(err, &so) {
		u.pool.drop(so.principal)
		return nil, u.loginRequired(so.principal)
	}
	return v, err
}

// signedOut is callOnce's error when the upstream needs principal to sign
// in again: its request found no usable token.
type signedOut struct{ principal string }

func (e *signedOut) Error() string { return "principal " + e.principal + " is signed out" }

// storeHasNone reports whether the store holds no usable token set of
// principal's (false when it cannot tell).
func (u *upstream) storeHasNone(ctx context.Context, principal string) bool {
	c, err := u.m.creds()
	if err != nil {
		return false
	}
	_, err = c.load(ctx, u.cfg.name, principal)
	return errors.Is(err, ErrNoCredentials)
}

// callOnce is one attempt of call.
func (u *upstream) callOnce(ctx context.Context, tc *registry.ToolContext, tool string, args json.RawMessage) (any, error) {
	var conn *registry.Connection
	if tc != nil {
		conn = tc.Conn
	}
	s, principal, release, err := u.sessionFor(ctx, tc, conn)
	if err != nil {
		return nil, err
	}
	defer release()
	cctx, cancel := context.WithTimeoutCause(ctx, u.cfg.Timeout.Duration, errCallTimeout)
	defer cancel()
	f := &inflight{ctx: cctx, tc: tc, sess: s, seq: u.seq.Add(1)}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := &callParams{Name: tool, Arguments: args}
	if tc != nil && tc.Peer != nil {
		f.token = "bub-" + strconv.FormatInt(f.seq, 10)
		params.Meta = &callMeta{ProgressToken: f.token}
	}
	u.active.add()
	defer u.active.done()
	u.calls.Store(f.seq, f)
	defer u.calls.Delete(f.seq)
	// The transport, not Client.CallTool: the request id is ours, so a
	// cancelled call can be named in notifications/cancelled on both
	// transports (mcp-go's client sends it on stdio only).
	id := mcp.NewRequestId("bub-call-" + strconv.FormatInt(f.seq, 10))
	resp, err := s.c.GetTransport().SendRequest(cctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: string(mcp.MethodToolsCall), Params: params})
	if err != nil && cctx.Err() != nil && s.alive() {
		u.cancelUpstream(s, id, context.Cause(cctx))
	}
	var res *mcp.CallToolResult
	if err == nil {
		if resp.Error != nil {
			err = resp.Error.AsError()
		} else {
			if len(resp.Result) >= largeResult {
				runtime.GC() // before decoding: the text reuses the pages of mcp-go's dead copies
				defer u.m.memory.releaseSoon()
			}
			res, err = parseResult(resp.Result)
			if err == nil {
				exposeResultURIs(u.cfg.name, res) // resource links route back through bub-mcp
			}
		}
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err() // the caller cancelled; the executor says so
		case principal != "" && errors.Is(err, transport.ErrOAuthAuthorizationRequired):
			// The token was revoked or deleted (logout), and no refresh
			// helps: this principal signs in again (call).
			return nil, &signedOut{principal: principal}
		case u.cfg.Auth == AuthTokenExchange && refused(err):
			// The exchanged token lapsed or was refused: the next call
			// trades again, over a new connection.
			return nil, u.exchangeRefused(principal, err)
		case context.Cause(cctx) == errCallTimeout:
			return nil, &registry.Error{Kind: registry.KindTemporary,
				Message: fmt.Sprintf("Tool '%s' of upstream %s timed out after %s (upstreams.%s.timeout); it was cancelled", tool, u.cfg.name, u.cfg.Timeout.Duration, u.cfg.name)}
		}
		if !s.alive() || u.lostDuring(s, err) {
			u.mu.Lock()
			closed := u.closed
			u.mu.Unlock()
			if closed && u.ctx.Err() != nil && u.m.ctx.Err() == nil {
				return nil, &registry.Error{Kind: registry.KindTemporary,
					Message: fmt.Sprintf("upstream %s was removed or changed by a configuration reload during the call of '%s' (it ran past the drain time); the call may or may not have taken effect", u.cfg.name, tool),
					Cause:   err}
			}
			return nil, &registry.Error{Kind: registry.KindTemporary,
				Message: fmt.Sprintf("upstream %s went away during the call of '%s' (%v); it is being restarted, and the call may or may not have taken effect", u.cfg.name, tool, s.reason()),
				Cause:   err}
		}
		return nil, &registry.Error{Kind: registry.KindTool, Message: fmt.Sprintf("upstream %s: tool '%s': %v", u.cfg.name, tool, err), Cause: err}
	}
	if res.IsError {
		te := newToolError(res)
		return nil, &registry.Error{Kind: registry.KindTool, Message: te.text, Cause: te}
	}
	return newResult(res), nil
}

// callParams are a tools/call request's params, typed: the arguments go
// on as the caller sent them.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      *callMeta       `json:"_meta,omitempty"`
}

type callMeta struct {
	ProgressToken string `json:"progressToken"`
}

// parseResult decodes a tools/call result as mcp.ParseCallToolResult
// does (content is required unless the result asks for more input), and as
// CallToolResult.UnmarshalJSON would, but with one copy of each text part
// instead of three: mcp-go keeps every part as raw JSON, then as a map,
// then as its text, which made a large result cost several times its
// size. Parts other than plain text are decoded by mcp-go.
func parseResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	if len(raw) == 0 {
		return nil, errors.New("response is nil")
	}
	// The fields of CallToolResult.UnmarshalJSON's own wire struct.
	var w struct {
		Meta              *mcp.Meta         `json:"_meta,omitempty"`
		ResultType        mcp.ResultType    `json:"resultType,omitempty"`
		Content           resultParts       `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
		IsError           bool              `json:"isError,omitempty"`
		InputRequests     mcp.InputRequests `json:"inputRequests,omitempty"`
		RequestState      string            `json:"requestState,omitempty"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("failed to unmarshal response: %w", err)
	}
	if !w.Content.present && w.ResultType != mcp.ResultTypeInputRequired {
		return nil, errors.New("content is missing")
	}
	res := &mcp.CallToolResult{IsError: w.IsError}
	res.Meta, res.ResultType, res.InputRequests, res.RequestState = w.Meta, w.ResultType, w.InputRequests, w.RequestState
	if len(w.Content.list) > 0 {
		res.Content = w.Content.list
	}
	if len(w.StructuredContent) > 0 {
		res.RawStructuredContent = w.StructuredContent
		if err := json.Unmarshal(w.StructuredContent, &res.StructuredContent); err != nil {
			return nil, fmt.Errorf("failed to unmarshal response: %w", err)
		}
	}
	return res, nil
}

// resultParts is a result's content list, and whether the key was there
// at all (null counts as there, as for mcp-go).
type resultParts struct {
	present bool
	list    []mcp.Content
}

func (p *resultParts) UnmarshalJSON(b []byte) error {
	p.present = true
	var parts []resultPart
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	for _, c := range parts {
		p.list = append(p.list, c.c)
	}
	return nil
}

// resultPart is one content part: plain text decoded straight into its
// string, anything else by mcp.UnmarshalContent.
type resultPart struct{ c mcp.Content }

func (p *resultPart) UnmarshalJSON(b []byte) error {
	var text struct {
		Type        string          `json:"type"`
		Text        string          `json:"text"`
		Annotations json.RawMessage `json:"annotations"`
		Meta        json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(b, &text); err == nil && text.Type == mcp.ContentTypeText && text.Annotations == nil && text.Meta == nil {
		p.c = mcp.NewTextContent(text.Text)
		return nil
	}
	c, err := mcp.UnmarshalContent(b)
	p.c = c
	return err
}

// pid is a stdio session's process id (and process group), 0 otherwise.
func (s *session) pid() int {
	if s == nil || s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}

// cancelUpstream tells the upstream to stop a request whose caller went
// away or whose time ran out; best effort, off the caller's path.
func (u *upstream) cancelUpstream(s *session, id mcp.RequestId, cause error) {
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: string(mcp.MethodNotificationCancelled),
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": cause.Error()}},
	}}
	u.m.wg.Add(1)
	go func() {
		defer u.m.wg.Done()
		ctx, cancel := context.WithTimeout(u.m.ctx, 5*time.Second)
		defer cancel()
		if err := s.c.GetTransport().SendNotification(ctx, n); err != nil {
			u.m.log.Debug("upstream.cancel", "upstream", u.cfg.name, "error", err)
		}
	}()
}

// reason is why a session ended, for messages.
func (s *session) reason() error {
	select {
	case <-s.dead:
		if s.err != nil {
			return s.err
		}
	case <-time.After(100 * time.Millisecond): // the exit status follows the closed pipe closely
	}
	return errors.New("connection lost")
}

// lostDuring reports whether a call's transport error means the session
// is gone: a stdio server's closed pipe, or an HTTP server that no longer
// answers a ping. Then the session is ended, so the loop restarts it.
func (u *upstream) lostDuring(s *session, err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) && !errors.Is(err, transport.ErrTransportClosed) {
		return false
	}
	if s.proc != nil {
		if errors.Is(err, transport.ErrTransportClosed) {
			<-s.dead // the pipe closed: the process is gone or going
			return true
		}
		return false
	}
	pctx, cancel := context.WithTimeout(u.m.ctx, 5*time.Second)
	defer cancel()
	//lint:ignore SA1019 the connection is on the 2025 protocol, where ping is how liveness is asked
	if perr := s.c.Ping(pctx); perr != nil {
		s.end(fmt.Errorf("no answer from upstream %s: %w", u.cfg.name, perr)) // not the URL: it may carry a secret
		return true
	}
	return false
}

// sessionFor is the connection a request of conn's goes over, with its
// principal ("" for the shared one): the caller's own, with the caller's
// own token, for an auth = "oauth" server (the local principal for a
// caller without one; tc, nil outside a tool call, lets its sign-in ask
// the client) or an auth = "token_exchange" one, else the shared
// connection. release must be called when the request is done.
func (u *upstream) sessionFor(ctx context.Context, tc *registry.ToolContext, conn *registry.Connection) (s *session, principal string, release func(), err error) {
	switch u.cfg.Auth {
	case AuthTokenExchange:
		var token registry.CallerToken
		if conn != nil {
			principal, token = conn.Principal, conn.OAuthToken
		}
		s, release, err = u.exchangeSession(ctx, principal, token)
	case AuthOAuth:
		if conn != nil {
			principal = conn.Principal
		}
		principal = principalOf(principal)
		s, release, err = u.principalSession(ctx, tc, principal)
	default:
		s, err = u.session(ctx)
		release = func() {}
	}
	return s, principal, release, err
}

// session returns the live session, starting a lazy upstream, waiting at
// most start_timeout for one that is (re)starting.
func (u *upstream) session(ctx context.Context) (*session, error) {
	u.start()
	u.mu.Lock()
	s, closed := u.cur, u.closed
	u.mu.Unlock()
	if !closed && s != nil && s.alive() { // the usual case, without a timer
		return s, nil
	}
	timer := time.NewTimer(u.cfg.StartTimeout.Duration)
	defer timer.Stop()
	for {
		u.mu.Lock()
		s, st, lastErr, ch, closed := u.cur, u.state, u.lastErr, u.changed, u.closed
		u.mu.Unlock()
		if closed {
			return nil, &registry.Error{Kind: registry.KindTemporary, Message: fmt.Sprintf("upstream %s is shut down", u.cfg.name)}
		}
		if s != nil && s.alive() {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			msg := fmt.Sprintf("upstream %s is not connected (state %s", u.cfg.name, st)
			if lastErr != "" {
				msg += ", last error: " + lastErr
			}
			return nil, &registry.Error{Kind: registry.KindTemporary, Message: msg + "); it is retried with backoff, see `bub-mcp upstreams`"}
		}
	}
}
