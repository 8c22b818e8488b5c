package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/host"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// Names of the agent's tools.
const (
	AgentRunName = "agent_run"
	SubagentName = "subagent"
)

func init() {
	registry.MustRegister(SubagentTool())
	registry.MustRegister(AgentRunTool())
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

// SubagentTool returns a new subagent tool (Bub's): it runs a nested turn
// with the caller's model (or another), in a temporary session (never
// kept), the caller's session or a named one, restricted to allowed_tools.
func SubagentTool() *registry.Tool {
	return registry.MustNewTool(SubagentName, "Run a task with a sub-agent using a specific model and session, optionally restricted to some tools.",
		runSubagent,
		registry.WithRenderer(renderSubagent),
		registry.WithAnnotations(registry.Annotations{Title: "Sub-agent", Destructive: true, OpenWorld: true}))
}

func runSubagent(ctx context.Context, tc *registry.ToolContext, in SubagentIn) (SubagentResult, error) {
	ti, ok := turnFrom(ctx)
	if !ok {
		return SubagentResult{}, registry.NewError(registry.KindConfig, "subagent needs the built-in agent and a configured model (BUB_MODEL or [agent] model).", nil)
	}
	parent, ok := host.ConnectionFrom(ctx)
	if !ok {
		return SubagentResult{}, registry.NewError(registry.KindConfig, "subagent needs a session, and this call has none.", nil)
	}
	a := ti.agent
	conn := *parent
	conn.Transport = "agent"
	envSession := parent.SessionKey
	switch s := strings.TrimSpace(in.Session); s {
	case "", "temp":
		conn.SessionKey = "temp/" + randomHex(4)
	case "inherit":
	default:
		conn.SessionKey = s
	}
	var allowed []string
	if len(in.AllowedTools) > 0 {
		var unknown []string
		for _, n := range in.AllowedTools {
			t, err := a.h.Registry().Lookup(n)
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
		conn2 := conn
		if err := a.h.Resolve(ctx, &conn2); err != nil {
			return SubagentResult{}, err
		}
		v, err := a.h.View(ctx, &conn2)
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
	spec := in.Model
	if spec == "" {
		spec = ti.model
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
	res, err := a.Run(ctx, &Turn{Conn: &conn, Prompt: in.Prompt, Model: spec, AllowedTools: allowed, AllowedSkills: in.AllowedSkills, Sink: sink, EnvSession: envSession})
	if err == nil && res != nil {
		out.Output = res.Text
	} else {
		out.Output = text.String()
	}
	return out, nil
}

// AgentRunIn are agent_run's arguments.
type AgentRunIn struct {
	Prompt    string `json:"prompt" jsonschema_description:"What the agent should do."`
	SessionID string `json:"session_id,omitempty" jsonschema_description:"The session whose tape the turn continues; default: this connection's session."`
}

// AgentRunTool returns a new agent_run tool: it runs one turn of the
// built-in agent for the calling connection (its profile's tools, its
// session) and returns the final text, the tool calls made and the token
// usage. Progress notifications carry the steps; cancelling the call stops
// the turn. Providers hide it unless the profile sets agent = true and a
// model is configured (see Provider).
func AgentRunTool() *registry.Tool {
	return registry.MustNewTool(AgentRunName, "Run one turn of bub's built-in agent: it works on the prompt with this server's tools until it has an answer, and returns the answer, the tool calls it made and the token usage.",
		runAgent,
		registry.WithRenderer(func(r Result) string { return r.Text }),
		registry.WithAnnotations(registry.Annotations{Title: "Run the agent", Destructive: true, OpenWorld: true}))
}

func runAgent(ctx context.Context, tc *registry.ToolContext, in AgentRunIn) (Result, error) {
	ti, ok := turnFrom(ctx)
	if !ok {
		return Result{}, registry.NewError(registry.KindConfig, "agent_run needs a configured model (BUB_MODEL or [agent] model) and a profile with agent = true.", nil)
	}
	parent, ok := host.ConnectionFrom(ctx)
	if !ok {
		return Result{}, registry.NewError(registry.KindConfig, "agent_run needs a session, and this call has none.", nil)
	}
	conn := *parent
	conn.Transport = "agent"
	if s := strings.TrimSpace(in.SessionID); s != "" {
		conn.SessionKey = s
	}
	a := ti.agent
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
	res, err := a.Run(ctx, &Turn{Conn: &conn, Prompt: in.Prompt, Model: ti.model, Sink: sink})
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

// Provider shows the agent's tools only where they can work, bound to an
// agent built from opts: agent_run to connections (not the agent's own)
// whose profile sets agent = true when a model is configured; subagent to
// the agent's own turns, and to those profiles when a model is
// configured. cfg supplies the profiles.
func Provider(cfg *config.Config, opts *Options) providers.Provider {
	var o Options
	if opts != nil {
		o = *opts
	}
	configured := o.Settings.Model != ""
	return func(ctx context.Context, conn *providers.Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
		profileAgent := false
		if p, ok := cfg.Profiles[conn.Profile]; ok {
			profileAgent = p.Agent
		}
		out := tools[:0:0]
		for _, t := range tools {
			switch t.Name {
			case AgentRunName:
				if configured && profileAgent && conn.Transport != "agent" {
					out = append(out, bind(t, &o))
				}
			case SubagentName:
				// The agent's own turns always have a model (--model may
				// name one the settings lack).
				if conn.Transport == "agent" || (configured && profileAgent) {
					out = append(out, bind(t, &o))
				}
			default:
				out = append(out, t)
			}
		}
		return out, "", nil
	}
}

// bind returns a copy of t whose handler runs with an agent built from
// opts over the calling host, unless the call already comes from a turn.
func bind(t *registry.Tool, opts *Options) *registry.Tool {
	cp := *t
	base := t.Handler
	cp.Handler = func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		if _, ok := turnFrom(ctx); !ok {
			h, ok := host.FromContext(ctx)
			if !ok {
				return nil, registry.NewError(registry.KindConfig, t.Name+" needs a host, and this call has none.", nil)
			}
			ctx = withTurn(ctx, &turnInfo{agent: New(h, opts)})
		}
		return base(ctx, tc, args)
	}
	return &cp
}
