package model

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// anthropicClient speaks the Anthropic Messages API with streaming,
// through the official SDK. It never reads ANTHROPIC_* variables.
type anthropicClient struct {
	svc    anthropic.MessageService
	apiKey string // cut out of errors (streamError)
}

func newAnthropic(cfg Config) *anthropicClient {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		// WithoutEnvironmentDefaults drops the production base URL too;
		// without it every request fails with "base url is not set".
		option.WithEnvironmentProduction(),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0), // the agent loop retries whole streams
		option.WithMiddleware(statusMiddleware(Anthropic, cfg.APIKey)),
	}
	if cfg.APIBase != "" {
		opts = append(opts, option.WithBaseURL(cfg.APIBase))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &anthropicClient{svc: anthropic.NewMessageService(opts...), apiKey: cfg.APIKey}
}

// params maps Chat Completions messages onto Messages: system messages
// become the system prompt (cached, as Bub marks it ephemeral), tool
// results become tool_result blocks of a user message, and consecutive
// messages of one role are merged, since the API wants them alternating
// and starting with the user.
func (c *anthropicClient) params(req *Request) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{Model: anthropic.Model(req.Model), MaxTokens: req.maxTokens()}
	switch req.ReasoningEffort {
	case "":
	case "none", "minimal":
		// Anthropic's scale starts at "low": the least there is.
		p.OutputConfig.Effort = anthropic.OutputConfigEffortLow
	default:
		p.OutputConfig.Effort = anthropic.OutputConfigEffort(req.ReasoningEffort)
	}
	var msgs []anthropic.MessageParam
	add := func(role anthropic.MessageParamRole, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
			return
		}
		msgs = append(msgs, anthropic.MessageParam{Role: role, Content: blocks})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			if m.Content != "" {
				p.System = append(p.System, anthropic.TextBlockParam{Text: m.Content})
			}
		case "user":
			if m.Content != "" {
				add(anthropic.MessageParamRoleUser, anthropic.NewTextBlock(m.Content))
			}
		case "tool":
			add(anthropic.MessageParamRoleUser, anthropic.NewToolResultBlock(m.ToolCallID, m.Content, false))
		case "assistant":
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				var input map[string]any
				if json.Unmarshal([]byte(tc.Arguments), &input) != nil || input == nil {
					input = map[string]any{}
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, input, tc.Name))
			}
			add(anthropic.MessageParamRoleAssistant, blocks...)
		}
	}
	if len(msgs) > 0 && msgs[0].Role != anthropic.MessageParamRoleUser {
		msgs = append([]anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("(continuing the conversation)"))}, msgs...)
	}
	p.Messages = msgs
	if n := len(p.System); n > 0 {
		p.System[n-1].CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	for _, t := range req.Tools {
		var schema struct {
			Properties any      `json:"properties"`
			Required   []string `json:"required"`
		}
		var extra map[string]any
		_ = json.Unmarshal(t.Parameters, &schema)
		_ = json.Unmarshal(t.Parameters, &extra)
		for _, k := range []string{"type", "properties", "required"} {
			delete(extra, k)
		}
		in := anthropic.ToolInputSchemaParam{Properties: schema.Properties, Required: schema.Required}
		if len(extra) > 0 {
			in.ExtraFields = extra
		}
		if in.Properties == nil {
			in.Properties = map[string]any{}
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return p
}

type anthropicBlock struct {
	kind     string // "text", "tool_use", "thinking", ...
	id, name string
	input    string
}

func (c *anthropicClient) Stream(ctx context.Context, req *Request) (iter.Seq2[Event, error], error) {
	params := c.params(req)
	return func(yield func(Event, error) bool) {
		stream := c.svc.NewStreaming(ctx, params)
		defer stream.Close()
		reply := &Reply{}
		var usage Usage
		haveUsage := false
		blocks := map[int64]*anthropicBlock{}
		var order []int64
		streamed := false
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "message_start":
				streamed = true
				u := ev.Message.Usage
				usage.PromptTokens = int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens)
				usage.CachedTokens = int(u.CacheReadInputTokens)
				usage.CompletionTokens = int(u.OutputTokens)
				haveUsage = true
			case "content_block_start":
				b := &anthropicBlock{kind: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
				blocks[ev.Index] = b
				order = append(order, ev.Index)
				if b.kind == "text" && ev.ContentBlock.Text != "" {
					reply.Text += ev.ContentBlock.Text
					if !yield(Event{Text: ev.ContentBlock.Text}, nil) {
						return
					}
				}
			case "content_block_delta":
				b := blocks[ev.Index]
				switch ev.Delta.Type {
				case "text_delta":
					reply.Text += ev.Delta.Text
					if !yield(Event{Text: ev.Delta.Text}, nil) {
						return
					}
				case "thinking_delta":
					reply.Reasoning += ev.Delta.Thinking
					if !yield(Event{Reasoning: ev.Delta.Thinking}, nil) {
						return
					}
				case "input_json_delta":
					if b != nil {
						b.input += ev.Delta.PartialJSON
					}
				}
			case "message_delta":
				if ev.Delta.StopReason != "" {
					reply.StopReason = string(ev.Delta.StopReason)
				}
				if ev.Usage.OutputTokens > 0 {
					usage.CompletionTokens = int(ev.Usage.OutputTokens)
				}
				if ev.Usage.InputTokens > 0 {
					usage.PromptTokens = int(ev.Usage.InputTokens + ev.Usage.CacheReadInputTokens + ev.Usage.CacheCreationInputTokens)
					usage.CachedTokens = int(ev.Usage.CacheReadInputTokens)
				}
				haveUsage = true
			}
		}
		if err := stream.Err(); err != nil {
			yield(Event{}, streamError(Anthropic, c.apiKey, err))
			return
		}
		if !streamed {
			yield(Event{}, notAStream(Anthropic, "Messages"))
			return
		}
		for _, i := range order {
			b := blocks[i]
			if b.kind != "tool_use" {
				continue
			}
			args := b.input
			if args == "" {
				args = "{}"
			}
			reply.ToolCalls = append(reply.ToolCalls, ToolCall{ID: b.id, Name: b.name, Arguments: args})
		}
		if haveUsage {
			usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
			reply.Usage = &usage
		}
		yield(Event{Reply: reply}, nil)
	}, nil
}
