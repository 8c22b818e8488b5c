package agent

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/bubbuild/bub-mcp/sessions"
)

// Messages maps tape entries (a session's context since its last anchor)
// onto the messages a model reads, as Bub's default tape context does:
//
//   - message: the message as recorded;
//   - tool_call: an assistant message with tool_calls (and the text the
//     model wrote alongside them, recorded as "content");
//   - tool_result: one tool message per result, matched to the calls of
//     the preceding tool_call by position (or by call_id, as the audit
//     entries of MCP calls carry);
//   - anchor: an assistant message "[Anchor created: name]: <state JSON>";
//   - system, event and error entries are skipped.
//
// Unlike Bub, a tool_call whose results never follow (an interrupted step,
// or the audit pair of an agent_run call that wraps a whole turn) is
// dropped, keeping its text, so that the messages stay valid for every
// provider.
func Messages(entries []sessions.Entry) []model.Message {
	var out []model.Message
	var pending *model.Message
	flush := func() {
		if pending != nil && pending.Content != "" {
			out = append(out, model.Message{Role: "assistant", Content: pending.Content})
		}
		pending = nil
	}
	for _, e := range entries {
		switch e.Kind {
		case sessions.KindAnchor:
			flush()
			name, _ := e.Payload["name"].(string)
			out = append(out, model.Message{Role: "assistant", Content: "[Anchor created: " + name + "]: " + pyJSON(e.Payload["state"])})
		case sessions.KindMessage:
			flush()
			if m, ok := messageOf(e.Payload); ok {
				out = append(out, m)
			}
		case sessions.KindToolCall:
			flush()
			calls := callsOf(e.Payload["calls"])
			if len(calls) == 0 {
				continue
			}
			content, _ := e.Payload["content"].(string)
			pending = &model.Message{Role: "assistant", Content: content, ToolCalls: calls}
		case sessions.KindToolResult:
			if pending == nil {
				continue
			}
			results, _ := e.Payload["results"].([]any)
			answered, outputs := pairResults(pending.ToolCalls, results)
			if len(answered) == 0 {
				flush()
				continue
			}
			out = append(out, model.Message{Role: "assistant", Content: pending.Content, ToolCalls: answered})
			for i, c := range answered {
				out = append(out, model.Message{Role: "tool", Content: outputs[i], ToolCallID: c.ID, Name: c.Name})
			}
			pending = nil
		}
	}
	flush()
	return out
}

func messageOf(p map[string]any) (model.Message, bool) {
	role, _ := p["role"].(string)
	if role == "" {
		return model.Message{}, false
	}
	m := model.Message{Role: role, Content: contentText(p["content"])}
	if role == "tool" {
		m.ToolCallID, _ = p["tool_call_id"].(string)
		m.Name, _ = p["name"].(string)
	}
	if role == "assistant" {
		m.ToolCalls = callsOf(p["tool_calls"])
	}
	return m, true
}

// contentText flattens a message content: a string, or the text parts of a
// multimodal list.
func contentText(v any) string {
	switch c := v.(type) {
	case nil:
		return ""
	case string:
		return c
	case []any:
		var parts []string
		for _, p := range c {
			if m, ok := p.(map[string]any); ok && m["type"] == "text" {
				if s, ok := m["text"].(string); ok {
					parts = append(parts, s)
				}
			}
		}
		return strings.Join(parts, "\n")
	default:
		return pyJSON(c)
	}
}

// callsOf reads recorded calls: {"id","type","function":{"name",
// "arguments"}} with arguments as JSON text (Bub, this loop) or as an
// object (the App's audit entries).
func callsOf(v any) []model.ToolCall {
	list, _ := v.([]any)
	var out []model.ToolCall
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		c := model.ToolCall{}
		c.ID, _ = m["id"].(string)
		fn, _ := m["function"].(map[string]any)
		if fn == nil {
			fn = m
		}
		c.Name, _ = fn["name"].(string)
		switch a := fn["arguments"].(type) {
		case string:
			c.Arguments = a
		case nil:
			c.Arguments = "{}"
		default:
			b, _ := json.Marshal(a)
			c.Arguments = string(b)
		}
		if c.ID == "" {
			c.ID = "call_" + strconv.Itoa(i)
		}
		out = append(out, c)
	}
	return out
}

// pairResults matches results to calls: by call_id when the results carry
// one, else by position.
func pairResults(calls []model.ToolCall, results []any) ([]model.ToolCall, []string) {
	byID := map[string]string{}
	for _, r := range results {
		if m, ok := r.(map[string]any); ok {
			if id, ok := m["call_id"].(string); ok {
				out, isStr := m["output"].(string)
				if !isStr {
					out = renderResult(m["output"])
				}
				byID[id] = out
			}
		}
	}
	var answered []model.ToolCall
	var outputs []string
	if len(byID) > 0 {
		for _, c := range calls {
			if out, ok := byID[c.ID]; ok {
				answered = append(answered, c)
				outputs = append(outputs, out)
			}
		}
		return answered, outputs
	}
	for i := 0; i < len(calls) && i < len(results); i++ {
		answered = append(answered, calls[i])
		outputs = append(outputs, renderResult(results[i]))
	}
	return answered, outputs
}

// renderResult is Bub's render_result: strings as they are, everything
// else as JSON.
func renderResult(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyJSON(v)
}

// pyJSON encodes like Python's json.dumps(ensure_ascii=False): ", " and
// ": " separators, keys in sorted order (tapes keep no key order).
func pyJSON(v any) string {
	var b strings.Builder
	writePy(&b, v)
	return b.String()
}

func writePy(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writePy(b, k)
			b.WriteString(": ")
			writePy(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writePy(b, e)
		}
		b.WriteByte(']')
	default:
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(x); err != nil {
			b.WriteString("null")
			return
		}
		b.WriteString(strings.TrimSuffix(buf.String(), "\n"))
	}
}
