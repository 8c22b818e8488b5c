package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// call runs one upstream tool for a caller.
func (u *upstream) call(ctx context.Context, tc *registry.ToolContext, tool string, args json.RawMessage) (any, error) {
	s, err := u.session(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeoutCause(ctx, u.cfg.Timeout.Duration, errCallTimeout)
	defer cancel()
	f := &inflight{ctx: cctx, tc: tc, seq: u.seq.Add(1)}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := &callParams{Name: tool, Arguments: args}
	if tc != nil && tc.Peer != nil {
		f.token = "bub-" + strconv.FormatInt(f.seq, 10)
		params.Meta = &callMeta{ProgressToken: f.token}
	}
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
			res, err = parseResult(resp.Result)
		}
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err() // the caller cancelled; the executor says so
		case context.Cause(cctx) == errCallTimeout:
			return nil, &registry.Error{Kind: registry.KindTemporary,
				Message: fmt.Sprintf("Tool '%s' of upstream %s timed out after %s (upstreams.%s.timeout); it was cancelled", tool, u.cfg.name, u.cfg.Timeout.Duration, u.cfg.name)}
		}
		if !s.alive() || u.lostDuring(s, err) {
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

// parseResult decodes a tools/call result, with mcp.ParseCallToolResult's
// rule (content is required unless the result asks for more input) but
// one decoding instead of two: the bytes were validated with the response
// that carried them, and only a result without content parts needs the
// second look, to tell an empty list from a missing one.
func parseResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	if len(raw) == 0 {
		return nil, errors.New("response is nil")
	}
	res := &mcp.CallToolResult{}
	if err := res.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("failed to unmarshal response: %w", err)
	}
	if res.Content == nil && res.ResultType != mcp.ResultTypeInputRequired {
		var probe struct {
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil || probe.Content == nil {
			return nil, errors.New("content is missing")
		}
	}
	return res, nil
}

// pid is a stdio session's process id (and process group), 0 otherwise.
func (s *session) pid() int {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
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
	if s.cmd != nil {
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
		s.end(fmt.Errorf("no answer from %s: %w", u.cfg.URL, perr))
		return true
	}
	return false
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
