package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
)

// This file routes what an upstream sends on its own: notifications, and
// its requests (sampling, elicitation) to the client whose call is in flight.

// soleCaller is the call that a request or log record from the upstream
// belongs to: the only one in flight, or the latest when every call in
// flight belongs to one run (the calls one run_code gathers share the
// caller's run id and client); otherwise nil, since the stdio and 2025
// wires do not say which call a server's request is for, and answering
// for another client would leak across clients. Only calls over s count:
// a request on one principal's connection (auth = "oauth") never reaches
// another principal's client.
func (u *upstream) soleCaller(s *session) *inflight {
	var latest *inflight
	ambiguous := false
	u.calls.Range(func(_, v any) bool {
		f := v.(*inflight)
		if f.sess != s {
			return true
		}
		if latest != nil && !sameClient(latest.tc, f.tc) {
			ambiguous = true
			return false
		}
		if latest == nil || f.seq > latest.seq {
			latest = f
		}
		return true
	})
	if ambiguous {
		return nil
	}
	return latest
}

func sameClient(a, b *registry.ToolContext) bool {
	if a == nil || b == nil || a.Conn == nil || b.Conn == nil || a.RunID == "" {
		return false
	}
	return a.RunID == b.RunID && *a.Conn == *b.Conn
}

// notification routes what the upstream sends: list changes reload its
// tools; progress goes to the call that asked for it; log records to the
// calling client when that is unambiguous, else to our log.
func (u *upstream) notification(s *session, n mcp.JSONRPCNotification) {
	if u.m.ctx.Err() != nil {
		return // shutting down
	}
	p := n.Params.AdditionalFields
	switch n.Method {
	case string(mcp.MethodNotificationToolsListChanged):
		u.listChanged(s)
	case string(mcp.MethodNotificationResourcesListChanged), string(mcp.MethodNotificationPromptsListChanged):
		// The catalog is shown to every caller: never one listed over a
		// principal's own connection, with that principal's token.
		if !u.cfg.perPrincipal() {
			u.catalogChanged(s)
		}
	case string(mcp.MethodNotificationResourceUpdated):
		if uri, ok := p["uri"].(string); ok {
			u.updated(uri)
		}
	case string(mcp.MethodNotificationProgress):
		tok := fmt.Sprint(p["progressToken"])
		u.calls.Range(func(_, v any) bool {
			f := v.(*inflight)
			if f.token != tok {
				return true
			}
			progress, _ := p["progress"].(float64)
			total, _ := p["total"].(float64)
			msg, _ := p["message"].(string)
			f.tc.Progress(f.ctx, progress, total, msg)
			return false
		})
	case "notifications/message":
		level, _ := p["level"].(string)
		logger, _ := p["logger"].(string)
		name := u.cfg.name
		if logger != "" {
			name += "/" + logger
		}
		if f := u.soleCaller(s); f != nil {
			f.tc.Log(f.ctx, slogLevel(level), name, p["data"])
			return
		}
		u.m.log.Log(context.Background(), slogLevel(level), "upstream.log", "upstream", name, "data", p["data"])
	}
}

// slogLevel maps MCP's syslog levels onto slog's, as mcpserver maps back.
func slogLevel(l string) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "info":
		return slog.LevelInfo
	case "notice":
		return slog.LevelInfo + 2
	case "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default: // critical, alert, emergency
		return slog.LevelError + 4
	}
}

// samplingHandler forwards the upstream's sampling requests to the
// client whose call is in flight.
type samplingHandler struct {
	u *upstream
	s *session
}

func (h samplingHandler) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	f := h.u.soleCaller(h.s)
	if f == nil {
		return nil, fmt.Errorf("bub-mcp: sampling from upstream %s cannot be forwarded: no single client's call is in flight", h.u.cfg.name)
	}
	sr := registry.SampleRequest{SystemPrompt: req.SystemPrompt, MaxTokens: req.MaxTokens}
	for i, m := range req.Messages {
		t, ok := mcp.AsTextContent(m.Content)
		if !ok {
			return nil, fmt.Errorf("bub-mcp: sampling message %d is not text; only text messages are forwarded", i)
		}
		sr.Messages = append(sr.Messages, registry.SampleMessage{Role: string(m.Role), Text: t.Text})
	}
	res, err := f.tc.Sample(f.ctx, sr)
	if err != nil {
		return nil, fmt.Errorf("bub-mcp: the calling client could not sample: %w", err)
	}
	out := &mcp.CreateMessageResult{Model: res.Model, StopReason: res.StopReason}
	out.Role = mcp.Role(res.Role)
	out.Content = mcp.NewTextContent(res.Text)
	return out, nil
}

// elicitationHandler forwards the upstream's elicitation requests to the
// client whose call is in flight.
type elicitationHandler struct {
	u *upstream
	s *session
}

func (h elicitationHandler) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	f := h.u.soleCaller(h.s)
	if f == nil {
		return nil, fmt.Errorf("bub-mcp: elicitation from upstream %s cannot be forwarded: no single client's call is in flight", h.u.cfg.name)
	}
	if req.Params.Mode == mcp.ElicitationModeURL {
		return nil, fmt.Errorf("bub-mcp: URL-mode elicitation is not forwarded")
	}
	var schema json.RawMessage
	if req.Params.RequestedSchema != nil {
		b, err := json.Marshal(req.Params.RequestedSchema)
		if err != nil {
			return nil, fmt.Errorf("bub-mcp: elicitation schema: %w", err)
		}
		schema = b
	}
	res, err := f.tc.Elicit(f.ctx, registry.ElicitRequest{Message: req.Params.Message, Schema: schema})
	if err != nil {
		return nil, fmt.Errorf("bub-mcp: the calling client could not answer the elicitation: %w", err)
	}
	out := &mcp.ElicitationResult{}
	out.Action = mcp.ElicitationResponseAction(res.Action)
	if res.Content != nil {
		out.Content = res.Content
	}
	return out, nil
}
