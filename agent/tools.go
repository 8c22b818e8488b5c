package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// Names of the agent's tools.
const (
	AgentRunName = "agent_run"
	SubagentName = "subagent"
)

// StateModel is the ToolContext.State key under which a turn passes its
// model ("provider:model") to its tools, so a subagent runs with the
// model of the turn that called it unless told otherwise. Calls from
// outside a turn (an MCP client's) carry none.
const StateModel = "agent.model"

// turnModel is the model of the turn a call belongs to, "" outside one.
func turnModel(tc *registry.ToolContext) string {
	s, _ := tc.State[StateModel].(string)
	return s
}

// SubagentIn are subagent's arguments (Bub's SubAgentInput).
type SubagentIn struct {
	Prompt        string   `json:"prompt" jsonschema_description:"The task for the sub-agent, with all the context it needs."`
	Model         string   `json:"model,omitempty" jsonschema_description:"The model to use (provider:model); default: the current one."`
	Session       string   `json:"session,omitempty" jsonschema:"default=temp" jsonschema_description:"'temp' for a temporary session that is thrown away, 'inherit' to share this session's tape, or a session id."`
	AllowedTools  []string `json:"allowed_tools,omitempty" jsonschema_description:"Tool names the sub-agent may use; default: every tool available here (subagent itself excluded)."`
	AllowedSkills []string `json:"allowed_skills,omitempty" jsonschema_description:"Skill names the sub-agent may use; default: all."`
}

// SubagentResult is subagent's structured result.
type SubagentResult struct {
	SessionID string   `json:"session_id"`
	Output    string   `json:"output"`
	Errors    []string `json:"errors"`
}

func renderSubagent(r SubagentResult) string {
	out := r.Output
	for _, e := range r.Errors {
		out += "[Error: " + e + "]"
	}
	return out
}

// subagentTool returns the subagent tool (Bub's): it runs a nested turn
// with the caller's model (or another), in a temporary session (never
// kept), the caller's session or a named one, restricted to allowed_tools.
func (m *Module) subagentTool() *registry.Tool {
	return registry.MustNewTool(SubagentName, "Run a task with a sub-agent using a specific model and session, optionally restricted to some tools.",
		m.runSubagent,
		registry.WithRenderer(renderSubagent),
		registry.WithAnnotations(registry.Annotations{Title: "Sub-agent", Destructive: true, OpenWorld: true}))
}

func (m *Module) runSubagent(ctx context.Context, tc *registry.ToolContext, in SubagentIn) (SubagentResult, error) {
	if tc == nil || tc.Conn == nil {
		return SubagentResult{}, registry.NewError(registry.KindConfig, "subagent needs a session, and this call has none.", nil)
	}
	a := m.Agent()
	parent := tc.Conn
	conn := *parent
	conn.Transport = "agent"
	envSession := parent.SessionKey
	switch s := strings.TrimSpace(in.Session); s {
	case "", "temp":
		conn.SessionKey = "temp/" + randomHex(4)
	case "inherit":
	default:
		if err := a.checkSession(parent, s); err != nil {
			return SubagentResult{}, err
		}
		conn.SessionKey = s
	}
	if err := a.app.Resolve(ctx, &conn); err != nil {
		return SubagentResult{}, err
	}
	if sessions.IsTemp(conn.SessionKey) {
		// Nobody else knows the temporary session: when the turn ends,
		// its tape, Views and Environment go.
		defer a.app.Forget(&conn)
	}
	spec := in.Model
	if spec == "" {
		spec = turnModel(tc)
	}
	if spec == "" && a.ModelFor(&conn) == "" {
		return SubagentResult{}, registry.NewError(registry.KindConfig, "subagent needs the built-in agent and a configured model (BUB_MODEL or [agent] model).", nil)
	}
	var allowed []string
	if len(in.AllowedTools) > 0 {
		var unknown []string
		for _, n := range in.AllowedTools {
			t, err := a.app.Registry().Lookup(n)
			if err != nil {
				unknown = append(unknown, "'"+strings.TrimSpace(n)+"'")
				continue
			}
			if t.Name != SubagentName {
				allowed = append(allowed, t.Name)
			}
		}
		if len(unknown) > 0 {
			return SubagentResult{}, registry.NewError(registry.KindInvalidInput, "unknown tool name(s): "+strings.Join(unknown, ", "), nil)
		}
	} else {
		v, err := a.app.View(ctx, &conn)
		if err != nil {
			return SubagentResult{}, err
		}
		for _, t := range v.Tools {
			if t.Name != SubagentName {
				allowed = append(allowed, t.Name)
			}
		}
	}
	if allowed == nil {
		allowed = []string{}
	}
	out := SubagentResult{SessionID: conn.SessionKey, Errors: []string{}}
	var text strings.Builder
	sink := SinkFunc(func(e Event) {
		switch e.Kind {
		case EventText:
			text.WriteString(e.Delta)
		case EventError:
			out.Errors = append(out.Errors, e.Error)
		}
	})
	res, err := a.Run(ctx, &Turn{Conn: &conn, Prompt: in.Prompt, Model: spec, AllowedTools: allowed, AllowedSkills: in.AllowedSkills, Sink: sink, EnvSession: envSession, State: tc.State})
	if err == nil && res != nil {
		out.Output = res.Text
	} else {
		out.Output = text.String()
	}
	return out, nil
}

// checkSession refuses a session id the caller's profile may not use
// ([profiles.<name>] sessions), so a client cannot read, reset or append
// to another profile's session through the agent.
func (a *Agent) checkSession(caller *providers.Connection, id string) error {
	if id == caller.SessionKey || strings.HasPrefix(id, caller.SessionKey+"/") {
		return nil // the caller's own session and those derived from it
	}
	p, err := a.app.Profile(caller.Profile)
	if err != nil {
		return registry.NewError(registry.KindConfig, err.Error(), nil)
	}
	if p.SessionAllowed(id) {
		return nil
	}
	return registry.NewError(registry.KindInvalidInput, fmt.Sprintf("session %q is outside what profile %q may use: %s; widen [profiles.%s] sessions to allow it.",
		id, p.Name, p.SessionScope(), p.Name), nil)
}

// AgentRunIn are agent_run's arguments.
type AgentRunIn struct {
	Prompt    string `json:"prompt" jsonschema_description:"What the agent should do."`
	SessionID string `json:"session_id,omitempty" jsonschema_description:"The session whose tape the turn continues; default: this connection's session."`
}

// agentRunTool returns the agent_run tool: it runs one turn of the
// built-in agent for the calling connection (its profile's tools, its
// session) and returns the final text, the tool calls made and the token
// usage. Progress notifications carry the steps; cancelling the call stops
// the turn. The module's filter hides it unless the profile sets agent =
// true and a model is configured.
func (m *Module) agentRunTool() *registry.Tool {
	return registry.MustNewTool(AgentRunName, "Run one turn of bub's built-in agent: it works on the prompt with this server's tools until it has an answer, and returns the answer, the tool calls it made and the token usage.",
		m.runAgent,
		registry.WithRenderer(func(r Result) string { return r.Text }),
		registry.WithAnnotations(registry.Annotations{Title: "Run the agent", Destructive: true, OpenWorld: true}))
}

func (m *Module) runAgent(ctx context.Context, tc *registry.ToolContext, in AgentRunIn) (Result, error) {
	if tc == nil || tc.Conn == nil {
		return Result{}, registry.NewError(registry.KindConfig, "agent_run needs a session, and this call has none.", nil)
	}
	a := m.Agent()
	conn := *tc.Conn
	conn.Transport = "agent"
	if s := strings.TrimSpace(in.SessionID); s != "" {
		if err := a.checkSession(tc.Conn, s); err != nil {
			return Result{}, err
		}
		conn.SessionKey = s
	}
	if err := a.app.Resolve(ctx, &conn); err != nil {
		return Result{}, err
	}
	spec := turnModel(tc)
	if spec == "" && a.ModelFor(&conn) == "" {
		return Result{}, registry.NewError(registry.KindConfig, "agent_run needs a configured model (BUB_MODEL or [agent] model) and a profile with agent = true.", nil)
	}
	maxSteps := float64(a.opts.Settings.MaxSteps)
	sink := SinkFunc(func(e Event) {
		switch e.Kind {
		case EventStep:
			tc.Progress(ctx, float64(e.Step-1), maxSteps, fmt.Sprintf("step %d", e.Step))
		case EventToolCall:
			names := make([]string, len(e.ToolCalls))
			for i, c := range e.ToolCalls {
				names[i] = c.Name
			}
			tc.Progress(ctx, float64(e.Step-1)+0.5, maxSteps, fmt.Sprintf("step %d: calling %s", e.Step, strings.Join(names, ", ")))
		case EventFinal:
			tc.Progress(ctx, maxSteps, maxSteps, "done")
		}
	})
	res, err := a.Run(ctx, &Turn{Conn: &conn, Prompt: in.Prompt, Model: spec, Sink: sink, State: tc.State})
	if err != nil {
		details := map[string]any{"steps": 0}
		if res != nil {
			details = map[string]any{"steps": res.Steps, "session_id": res.SessionID, "tool_calls": len(res.ToolCalls)}
		}
		return Result{}, registry.NewError(registry.KindProvider, err.Error(), details)
	}
	return *res, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
