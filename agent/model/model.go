// Package model talks to language models for the agent loop. A Client
// streams one reply for a Request; two implementations exist, both built
// on the providers' official SDKs: OpenAI-compatible Chat Completions
// (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp, LM Studio and any other
// server speaking that protocol) and Anthropic Messages.
//
// Models are named "provider:model" ("openai:gpt-4o-mini",
// "anthropic:claude-sonnet-4-5", "ollama:qwen3"): the provider picks the
// client and its default base URL, the rest is the model id sent to the
// API.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Message is one message of the conversation, in the Chat Completions
// shape; the Anthropic client maps it onto content blocks.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls are an assistant message's calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Name identify the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
}

// ToolCall is one function call a model asked for.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text the model produced; it may be invalid.
	Arguments string `json:"arguments"`
}

// Tool is a function the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	// Model is the model id, without the provider.
	Model string
	// Messages start with the system message, if any.
	Messages []Message
	Tools    []Tool
	// MaxTokens caps the reply; zero means the client's default (16384).
	MaxTokens int
	// ReasoningEffort asks a reasoning model to think more or less (one
	// of ReasoningEfforts); empty sends nothing, the provider's default.
	ReasoningEffort string
}

// ReasoningEfforts are the values ,reasoning_effort accepts: OpenAI's
// reasoning_effort levels, which Anthropic's output effort shares from
// "low" up.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// Usage counts the tokens of one call, in the Chat Completions shape
// (Anthropic's counts are mapped onto it).
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens are prompt tokens read from the provider's cache.
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// Add sums two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.PromptTokens + o.PromptTokens, u.CompletionTokens + o.CompletionTokens, u.TotalTokens + o.TotalTokens, u.CachedTokens + o.CachedTokens}
}

// Map is the usage as recorded on a tape's "run" event:
// {prompt_tokens, completion_tokens, total_tokens,
// prompt_tokens_details: {cached_tokens}}, which tape.info reads.
func (u Usage) Map() map[string]any {
	return map[string]any{
		"prompt_tokens":         u.PromptTokens,
		"completion_tokens":     u.CompletionTokens,
		"total_tokens":          u.TotalTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.CachedTokens},
	}
}

// Reply is a complete model reply.
type Reply struct {
	Text      string
	Reasoning string
	ToolCalls []ToolCall
	// Usage is nil when the server reported none.
	Usage *Usage
	// StopReason is the provider's finish reason ("stop", "tool_calls",
	// "end_turn", "tool_use", "max_tokens", ...).
	StopReason string
}

// Event is one piece of a streamed reply: a text or reasoning delta, or,
// last, the complete Reply.
type Event struct {
	Text      string
	Reasoning string
	// Reply is set on the final event only.
	Reply *Reply
}

// Client streams model replies. Implementations must honor ctx.
type Client interface {
	// Stream sends req and returns the reply as a sequence of events that
	// ends with the Reply (or an error). The error result is for requests
	// that cannot be sent at all; HTTP and network failures arrive
	// through the sequence.
	Stream(ctx context.Context, req *Request) (iter.Seq2[Event, error], error)
}

// Collect drains a stream, calling onDelta (if not nil) for every text or
// reasoning delta, and returns the Reply.
func Collect(seq iter.Seq2[Event, error], onDelta func(Event)) (*Reply, error) {
	var reply *Reply
	for ev, err := range seq {
		if err != nil {
			return nil, err
		}
		if ev.Reply != nil {
			reply = ev.Reply
			continue
		}
		if onDelta != nil {
			onDelta(ev)
		}
	}
	if reply == nil {
		return nil, &Error{Message: "the model's stream ended without a reply", Retryable: true}
	}
	return reply, nil
}

// Error is a failed model call. Clients return it for HTTP errors and
// broken streams, so the loop can tell what to retry.
type Error struct {
	// Provider is the provider name ("openai", "anthropic", ...).
	Provider string
	// StatusCode is the HTTP status, 0 for network and stream failures.
	StatusCode int
	// Message is the server's error message, or a description.
	Message string
	// Retryable marks failures worth another attempt: network errors,
	// timeouts, 408, 409, 429 and 5xx.
	Retryable bool
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("model")
	if e.Provider != "" {
		b.WriteString(" " + e.Provider)
	}
	b.WriteString(": ")
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "HTTP %d: ", e.StatusCode)
	}
	b.WriteString(e.Message)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

var contextLengthRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)context.{0,20}(?:length|window)|maximum.{0,20}context|token.{0,10}limit|prompt.{0,10}too long|tokens? > \d+ maximum`)
})

// IsContextLength reports whether err says the prompt did not fit the
// model's context window (Bub's is_context_length_error patterns).
func IsContextLength(err error) bool {
	return err != nil && contextLengthRE().MatchString(err.Error())
}

// IsRetryable reports whether another attempt may succeed: a retryable
// *Error, a network error, an unexpected EOF or a timeout of the attempt.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var me *Error
	if errors.As(err, &me) {
		if me.Retryable {
			return true
		}
		if me.StatusCode != 0 {
			return false
		}
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &ne)
}

// streamError is the *Error of a stream that failed once the response
// had begun; an *Error from statusMiddleware passes through.
func streamError(provider, apiKey string, err error) error {
	var me *Error
	if errors.As(err, &me) {
		return me
	}
	// An error event in the stream may quote the key as a refusal does.
	return &Error{Provider: provider, Message: "stream failed: " + redactKey(err.Error(), apiKey), Retryable: IsRetryable(err), Err: err}
}

// notAStream is the *Error of a success response that held no event of
// the API's stream: a web page, a captive portal, another API's JSON. Its
// reply would be empty, and the turn would end as if the model had said
// nothing; the usual cause is a base URL that names the wrong server or
// path.
func notAStream(provider, api string) error {
	return &Error{Provider: provider, Message: "the server answered without a " + api + " stream: is the API base URL right? (BUB_<PROVIDER>_API_BASE, BUB_API_BASE or [agent] api_base)"}
}

func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500
}

// statusMiddleware turns an HTTP error response into an *Error carrying
// the status and the server's message, whatever shape the body has (the
// SDKs expect their own providers' shapes; Ollama and friends differ).
// Some servers quote the key they refused ("Incorrect API key provided:
// sk-..."); the message reaches the terminal, the tape and agent_run's
// MCP client, so apiKey is cut out of it.
func statusMiddleware(provider, apiKey string) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		res, err := next(req)
		if err != nil {
			return nil, &Error{Provider: provider, Message: err.Error(), Retryable: !errors.Is(err, context.Canceled), Err: err}
		}
		if res.StatusCode < 400 {
			return res, nil
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		return nil, &Error{Provider: provider, StatusCode: res.StatusCode, Message: redactKey(errorMessage(body, res.Status), apiKey), Retryable: retryableStatus(res.StatusCode)}
	}
}

// redactKey replaces every occurrence of key in s. A key shorter than 8
// bytes is left alone: it cannot be told from ordinary words, and no
// hosted provider issues one.
func redactKey(s, key string) string {
	if len(key) < 8 {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted API key]")
}

// errorMessage finds the message in an error body: {"error":{"message"}},
// {"error":"..."}, {"message":"..."} or the body itself.
func errorMessage(body []byte, status string) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case v.Message != "":
			return v.Message
		}
	}
	text := strings.TrimSpace(string(body))
	if text == "" {
		return status
	}
	if len(text) > 2000 {
		text = text[:2000] + "..."
	}
	return text
}

// Config selects and configures a client.
type Config struct {
	// Provider is the part before ":" in "provider:model".
	Provider string
	// Model is the model id sent to the API.
	Model string
	// APIKey authenticates; empty sends none (local servers).
	APIKey string
	// APIBase overrides the provider's base URL.
	APIBase string
	// HTTPClient is used for requests; nil means a client without a
	// global timeout (the caller bounds each attempt with its context).
	HTTPClient *http.Client
}

// Anthropic is the provider served by the Anthropic Messages client;
// every other provider uses the OpenAI-compatible client.
const Anthropic = "anthropic"

// baseURLs are the known providers' default base URLs for the
// OpenAI-compatible client.
var baseURLs = map[string]string{
	"openai":     "https://api.openai.com/v1",
	"openrouter": "https://openrouter.ai/api/v1",
	"ollama":     "http://localhost:11434/v1",
	"lmstudio":   "http://localhost:1234/v1",
	"vllm":       "http://localhost:8000/v1",
	"llamacpp":   "http://localhost:8080/v1",
	"groq":       "https://api.groq.com/openai/v1",
	"deepseek":   "https://api.deepseek.com/v1",
	"mistral":    "https://api.mistral.ai/v1",
	"together":   "https://api.together.xyz/v1",
	"fireworks":  "https://api.fireworks.ai/inference/v1",
	"xai":        "https://api.x.ai/v1",
	"gemini":     "https://generativelanguage.googleapis.com/v1beta/openai",
	"moonshot":   "https://api.moonshot.ai/v1",
	"dashscope":  "https://dashscope.aliyuncs.com/compatible-mode/v1",
}

// NeedsKey reports whether calls to provider at apiBase (empty: its
// default) need an API key: the hosted providers do, a server on this
// machine (Ollama, LM Studio, vLLM, llama.cpp, any loopback URL) does not.
// An unknown provider's own URL is given the benefit of the doubt.
func NeedsKey(provider, apiBase string) bool {
	if apiBase == "" {
		if provider == Anthropic {
			return true
		}
		apiBase = baseURLs[provider]
	}
	u, err := url.Parse(apiBase)
	if err != nil || u.Hostname() == "" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return false
	}
	if ip := net.ParseIP(host); ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast()) {
		return false
	}
	_, known := baseURLs[provider]
	return known || provider == Anthropic
}

// BaseURL returns a known provider's default base URL for the
// OpenAI-compatible client ("" for anthropic, whose SDK knows its own).
func BaseURL(provider string) (string, bool) {
	if provider == Anthropic {
		return "", true
	}
	u, ok := baseURLs[provider]
	return u, ok
}

// Providers lists the providers with a known base URL, sorted.
func Providers() []string {
	out := []string{Anthropic}
	for p := range baseURLs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Split parses "provider:model". The model id may itself contain ":" or
// "/" ("openrouter:openrouter/free", "ollama:qwen3:8b").
func Split(spec string) (provider, model string, err error) {
	provider, model, ok := strings.Cut(strings.TrimSpace(spec), ":")
	provider = strings.ToLower(strings.TrimSpace(provider))
	model = strings.TrimSpace(model)
	if !ok || provider == "" || model == "" {
		return "", "", fmt.Errorf("model: %q is not provider:model (e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, ollama:qwen3)", spec)
	}
	return provider, model, nil
}

// New returns the client for cfg.Provider.
func New(cfg Config) (Client, error) {
	if cfg.Model == "" {
		return nil, errors.New("model: no model id")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Provider == Anthropic {
		return newAnthropic(cfg), nil
	}
	if cfg.APIBase == "" {
		cfg.APIBase = baseURLs[cfg.Provider]
	}
	if cfg.APIBase == "" {
		return nil, fmt.Errorf("model: unknown provider %q: set its base URL (BUB_API_BASE or [agent] api_base) to use an OpenAI-compatible server; known providers: %s",
			cfg.Provider, strings.Join(Providers(), ", "))
	}
	return newOpenAI(cfg), nil
}

// DefaultMaxTokens is used when a Request leaves MaxTokens zero.
const DefaultMaxTokens = 16384

func (r *Request) maxTokens() int64 {
	if r.MaxTokens <= 0 {
		return DefaultMaxTokens
	}
	return int64(r.MaxTokens)
}
