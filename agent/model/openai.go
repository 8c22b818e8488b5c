package model

import (
	"context"
	"encoding/json"
	"iter"
	"sort"
	"strconv"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// openAIClient speaks Chat Completions with streaming, through the
// official SDK. It never reads OPENAI_* variables: the base URL and key
// come from Config only.
type openAIClient struct {
	provider string
	svc      openai.ChatCompletionService
	apiKey   string // cut out of errors (streamError)
}

func newOpenAI(cfg Config) *openAIClient {
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.APIBase),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0), // the agent loop retries whole streams
		option.WithMiddleware(statusMiddleware(cfg.Provider, cfg.APIKey)),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &openAIClient{provider: cfg.Provider, svc: openai.NewChatCompletionService(opts...), apiKey: cfg.APIKey}
}

func (c *openAIClient) params(req *Request) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(req.Model),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if c.provider == "openai" {
		// OpenAI's reasoning models refuse max_tokens.
		p.MaxCompletionTokens = openai.Int(req.maxTokens())
	} else {
		p.MaxTokens = openai.Int(req.maxTokens())
	}
	if req.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			p.Messages = append(p.Messages, openai.SystemMessage(m.Content))
		case "user":
			p.Messages = append(p.Messages, openai.UserMessage(m.Content))
		case "tool":
			p.Messages = append(p.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		case "assistant":
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	for _, t := range req.Tools {
		var params map[string]any
		_ = json.Unmarshal(t.Parameters, &params)
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(params)}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	return p
}

type partialCall struct {
	id, name, args string
}

func (c *openAIClient) Stream(ctx context.Context, req *Request) (iter.Seq2[Event, error], error) {
	params := c.params(req)
	return func(yield func(Event, error) bool) {
		stream := c.svc.NewStreaming(ctx, params)
		defer stream.Close()
		reply := &Reply{}
		calls := map[int64]*partialCall{}
		streamed := false
		for stream.Next() {
			chunk := stream.Current()
			streamed = streamed || len(chunk.Choices) > 0 || chunk.JSON.Usage.Valid()
			if chunk.JSON.Usage.Valid() && chunk.Usage.TotalTokens+chunk.Usage.PromptTokens > 0 {
				reply.Usage = &Usage{
					PromptTokens:     int(chunk.Usage.PromptTokens),
					CompletionTokens: int(chunk.Usage.CompletionTokens),
					TotalTokens:      int(chunk.Usage.TotalTokens),
					CachedTokens:     int(chunk.Usage.PromptTokensDetails.CachedTokens),
				}
			}
			for _, ch := range chunk.Choices {
				d := ch.Delta
				if r := reasoningDelta(d.RawJSON()); r != "" {
					reply.Reasoning += r
					if !yield(Event{Reasoning: r}, nil) {
						return
					}
				}
				if d.Content != "" {
					reply.Text += d.Content
					if !yield(Event{Text: d.Content}, nil) {
						return
					}
				}
				for _, tc := range d.ToolCalls {
					pc := calls[tc.Index]
					if pc == nil {
						pc = &partialCall{}
						calls[tc.Index] = pc
					}
					if tc.ID != "" {
						pc.id = tc.ID
					}
					// Some servers repeat the name in every delta, others
					// split it; Bub's StreamToolCall handles both.
					if n := tc.Function.Name; n != "" && n != pc.name {
						pc.name += n
					}
					pc.args += tc.Function.Arguments
				}
				if ch.FinishReason != "" {
					reply.StopReason = ch.FinishReason
				}
			}
		}
		if err := stream.Err(); err != nil {
			yield(Event{}, streamError(c.provider, c.apiKey, err))
			return
		}
		if !streamed {
			yield(Event{}, notAStream(c.provider, "Chat Completions"))
			return
		}
		idx := make([]int64, 0, len(calls))
		for i := range calls {
			idx = append(idx, i)
		}
		sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
		for n, i := range idx {
			pc := calls[i]
			id := pc.id
			if id == "" {
				id = "call_" + strconv.Itoa(n)
			}
			args := pc.args
			if args == "" {
				args = "{}"
			}
			reply.ToolCalls = append(reply.ToolCalls, ToolCall{ID: id, Name: pc.name, Arguments: args})
		}
		yield(Event{Reply: reply}, nil)
	}, nil
}

// reasoningDelta reads the non-standard reasoning fields some servers
// stream (OpenRouter "reasoning", vLLM/DeepSeek "reasoning_content").
func reasoningDelta(raw string) string {
	if raw == "" {
		return ""
	}
	var d struct {
		Reasoning        string `json:"reasoning"`
		ReasoningContent string `json:"reasoning_content"`
	}
	if json.Unmarshal([]byte(raw), &d) != nil {
		return ""
	}
	if d.Reasoning != "" {
		return d.Reasoning
	}
	return d.ReasoningContent
}
