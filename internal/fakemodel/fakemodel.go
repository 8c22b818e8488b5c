// Package fakemodel serves scripted model replies over the OpenAI Chat
// Completions and Anthropic Messages wire formats, streaming included, for
// tests of the agent loop and the CLI. It records every request body.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is a tool call in a scripted reply.
type Call struct {
	ID, Name string
	// Arguments is sent as is (it may be invalid JSON).
	Arguments string
}

// Reply is one scripted response.
type Reply struct {
	Text  string
	Calls []Call
	// Usage tokens; zero values send {prompt 10, completion 5}.
	PromptTokens, CompletionTokens, CachedTokens int
	// Status, when set, answers with this HTTP status and Body instead.
	Status int
	Body   string
	// Delay holds the response back (or until the client gives up).
	Delay time.Duration
}

// Script chooses the reply to the n-th request (from 0).
type Script func(n int, req map[string]any) Reply

// Replies scripts a fixed sequence; requests past its end fail the test.
func Replies(t testing.TB, rs ...Reply) Script {
	return func(n int, _ map[string]any) Reply {
		if n >= len(rs) {
			t.Errorf("fakemodel: unexpected request %d (script has %d replies)", n+1, len(rs))
			return Reply{Status: 500, Body: `{"error":{"message":"script exhausted"}}`}
		}
		return rs[n]
	}
}

// Server is a fake model server.
type Server struct {
	// URL is the server's root; the OpenAI base URL is URL+"/v1".
	URL string

	srv    *httptest.Server
	script Script
	mu     sync.Mutex
	reqs   []map[string]any
}

// NewOpenAI serves Chat Completions at /v1/chat/completions.
func NewOpenAI(t testing.TB, script Script) *Server { return start(t, script, false) }

// NewAnthropic serves Messages at /v1/messages (base URL: URL).
func NewAnthropic(t testing.TB, script Script) *Server { return start(t, script, true) }

func start(t testing.TB, script Script, anthropic bool) *Server {
	s := &Server{script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, `{"error":{"message":"bad json"}}`, 400)
			return
		}
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, req)
		s.mu.Unlock()
		rep := s.script(n, req)
		if rep.Delay > 0 {
			select {
			case <-time.After(rep.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if rep.Status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rep.Status)
			io.WriteString(w, rep.Body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if anthropic {
			writeAnthropic(w, rep)
		} else {
			writeOpenAI(w, rep)
		}
	}))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Requests returns the request bodies received so far.
func (s *Server) Requests() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.reqs...)
}

// halves splits s in two, so every text and argument is streamed in more
// than one piece.
func halves(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	m := len(s) / 2
	return []string{s[:m], s[m:]}
}

func usage(r Reply) (int, int, int) {
	p, c := r.PromptTokens, r.CompletionTokens
	if p == 0 && c == 0 {
		p, c = 10, 5
	}
	return p, c, r.CachedTokens
}

func sse(w io.Writer, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeOpenAI(w io.Writer, r Reply) {
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if r.Text != "" {
		for _, part := range halves(r.Text) {
			sse(w, "", chunk(map[string]any{"content": part}, nil))
		}
	}
	for i, c := range r.Calls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i+1)
		}
		sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": id, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
		for _, part := range halves(c.Arguments) {
			sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil))
		}
	}
	finish := "stop"
	if len(r.Calls) > 0 {
		finish = "tool_calls"
	}
	sse(w, "", chunk(map[string]any{}, finish))
	p, c, cached := usage(r)
	sse(w, "", map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c, "prompt_tokens_details": map[string]any{"cached_tokens": cached}}})
	io.WriteString(w, "data: [DONE]\n\n")
}

func writeAnthropic(w io.Writer, r Reply) {
	p, c, cached := usage(r)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
		"content": []any{}, "model": "fake", "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": p - cached, "cache_read_input_tokens": cached, "output_tokens": 1}}})
	idx := 0
	if r.Text != "" {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, part := range halves(r.Text) {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": part}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	for i, call := range r.Calls {
		id := call.ID
		if id == "" {
			id = fmt.Sprintf("toolu_%d", i+1)
		}
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "tool_use", "id": id, "name": call.Name, "input": map[string]any{}}})
		for _, part := range halves(call.Arguments) {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	stop := "end_turn"
	if len(r.Calls) > 0 {
		stop = "tool_use"
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": c}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// ChatMessage is an OpenAI request message, reduced to what tests compare.
type ChatMessage struct {
	Role       string
	Content    string
	ToolCalls  []Call
	ToolCallID string
}

// OpenAIMessages decodes the messages of an OpenAI request body.
func OpenAIMessages(req map[string]any) []ChatMessage {
	var out []ChatMessage
	list, _ := req["messages"].([]any)
	for _, item := range list {
		m, _ := item.(map[string]any)
		cm := ChatMessage{}
		cm.Role, _ = m["role"].(string)
		switch c := m["content"].(type) {
		case string:
			cm.Content = c
		case []any:
			var parts []string
			for _, p := range c {
				if pm, ok := p.(map[string]any); ok {
					if s, ok := pm["text"].(string); ok {
						parts = append(parts, s)
					}
				}
			}
			cm.Content = strings.Join(parts, "")
		}
		cm.ToolCallID, _ = m["tool_call_id"].(string)
		calls, _ := m["tool_calls"].([]any)
		for _, ci := range calls {
			cmap, _ := ci.(map[string]any)
			fn, _ := cmap["function"].(map[string]any)
			call := Call{}
			call.ID, _ = cmap["id"].(string)
			call.Name, _ = fn["name"].(string)
			call.Arguments, _ = fn["arguments"].(string)
			cm.ToolCalls = append(cm.ToolCalls, call)
		}
		out = append(out, cm)
	}
	return out
}

// ToolNames lists the function names a request offered (either format).
func ToolNames(req map[string]any) []string {
	var out []string
	list, _ := req["tools"].([]any)
	for _, item := range list {
		m, _ := item.(map[string]any)
		if fn, ok := m["function"].(map[string]any); ok {
			n, _ := fn["name"].(string)
			out = append(out, n)
			continue
		}
		n, _ := m["name"].(string)
		out = append(out, n)
	}
	return out
}
