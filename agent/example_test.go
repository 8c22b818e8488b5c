package agent_test

import (
	"fmt"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/sessions"
)

// ExampleMessages shows how a recorded step becomes the messages of the
// next model call.
func ExampleMessages() {
	entries := []sessions.Entry{
		{Kind: "message", Payload: map[string]any{"role": "user", "content": "What is in README.md?"}},
		{Kind: "tool_call", Payload: map[string]any{"calls": []any{map[string]any{
			"id": "call_1", "type": "function", "function": map[string]any{"name": "fs_read", "arguments": `{"path":"README.md"}`}}}}},
		{Kind: "tool_result", Payload: map[string]any{"results": []any{"# bub-mcp"}}},
		{Kind: "event", Payload: map[string]any{"name": "run"}},
		{Kind: "message", Payload: map[string]any{"role": "assistant", "content": "A title."}},
	}
	for _, m := range agent.Messages(entries) {
		fmt.Printf("%s %q", m.Role, m.Content)
		for _, c := range m.ToolCalls {
			fmt.Printf(" -> %s(%s)", c.Name, c.Arguments)
		}
		fmt.Println()
	}
	// Output:
	// user "What is in README.md?"
	// assistant "" -> fs_read({"path":"README.md"})
	// tool "# bub-mcp"
	// assistant "A title."
}
