package agent_test

import (
	"testing"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/google/go-cmp/cmp"
)

func TestMessages(t *testing.T) {
	e := func(kind string, payload map[string]any) sessions.Entry {
		return sessions.Entry{Kind: kind, Payload: payload}
	}
	call := func(id, name string, args any) any {
		return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
	}
	entries := []sessions.Entry{
		e("anchor", map[string]any{"name": "phase-1", "state": map[string]any{"summary": "done", "n": 2.0}}),
		e("system", map[string]any{"content": "ignored"}),
		e("message", map[string]any{"role": "user", "content": "hi"}),
		e("event", map[string]any{"name": "run"}),
		e("tool_call", map[string]any{"content": "checking", "calls": []any{call("c1", "fs_read", `{"path":"a"}`), call("c2", "tape_info", "{}")}}),
		e("tool_result", map[string]any{"results": []any{"A", map[string]any{"entries": 3.0}}}),
		e("error", map[string]any{"kind": "provider", "message": "ignored"}),
		// The audit pair of an MCP call: object arguments, results by call_id.
		e("tool_call", map[string]any{"calls": []any{call("mcp-1", "bash", map[string]any{"command": "ls"})}}),
		e("tool_result", map[string]any{"results": []any{map[string]any{"call_id": "mcp-1", "output": "x\ny", "status": "ok", "elapsed_ms": 3.0}}}),
		// A call whose result never came (agent_run wrapping a turn) is dropped.
		e("tool_call", map[string]any{"calls": []any{call("mcp-2", "agent_run", map[string]any{"prompt": "p"})}}),
		e("message", map[string]any{"role": "user", "content": "next"}),
		e("message", map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "part"}}}),
		e("tool_result", map[string]any{"results": []any{map[string]any{"call_id": "mcp-2", "output": "late"}}}),
		// More results than calls: the extra ones have no call.
		e("tool_call", map[string]any{"calls": []any{call("c3", "fs_read", `{}`)}}),
		e("tool_result", map[string]any{"results": []any{"one", "two"}}),
	}
	want := []model.Message{
		{Role: "assistant", Content: `[Anchor created: phase-1]: {"n": 2, "summary": "done"}`},
		{Role: "user", Content: "hi"},
		{Role: "assistant", Content: "checking", ToolCalls: []model.ToolCall{{ID: "c1", Name: "fs_read", Arguments: `{"path":"a"}`}, {ID: "c2", Name: "tape_info", Arguments: "{}"}}},
		{Role: "tool", Content: "A", ToolCallID: "c1", Name: "fs_read"},
		{Role: "tool", Content: `{"entries": 3}`, ToolCallID: "c2", Name: "tape_info"},
		{Role: "assistant", ToolCalls: []model.ToolCall{{ID: "mcp-1", Name: "bash", Arguments: `{"command":"ls"}`}}},
		{Role: "tool", Content: "x\ny", ToolCallID: "mcp-1", Name: "bash"},
		{Role: "user", Content: "next"},
		{Role: "assistant", Content: "part"},
		{Role: "assistant", ToolCalls: []model.ToolCall{{ID: "c3", Name: "fs_read", Arguments: "{}"}}},
		{Role: "tool", Content: "one", ToolCallID: "c3", Name: "fs_read"},
	}
	if diff := cmp.Diff(want, agent.Messages(entries)); diff != "" {
		t.Errorf("Messages (-want +got):\n%s", diff)
	}
}
