// Package conformance is the module with the fixtures the official MCP
// conformance suite expects (tools, resources, prompts, completions), plus
// an `echo` tool for benchmarks against other servers. It is an ordinary
// bub-mcp module: it registers in init() and is compiled into a binary by
// a blank import (see cmd/bub-mcp-conformance), which is also the proof
// that the plugin mechanism works end to end.
package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// A 1×1 PNG and a tiny WAV file, base64.
const (
	pngB64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	wavB64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

func mustDecode(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

var (
	pngData = mustDecode(pngB64)
	wavData = mustDecode(wavB64)
)

type none struct{}

// EchoArgs is the echo tool's input.
type EchoArgs struct {
	Message string `json:"message" jsonschema:"description=Text to echo back"`
}

// readOnly annotates the fixtures that change nothing.
var readOnly = registry.WithAnnotations(registry.Annotations{ReadOnly: true, Idempotent: true})

func noArgs(name, desc string, fn func(ctx context.Context, tc *registry.ToolContext) (any, error), opts ...registry.Option) *registry.Tool {
	return registry.MustNewTool(name, desc, func(ctx context.Context, tc *registry.ToolContext, _ none) (any, error) {
		return fn(ctx, tc)
	}, append([]registry.Option{readOnly}, opts...)...)
}

// json2020 is the schema the json-schema-2020-12 scenario wants back
// verbatim.
const json2020 = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`

func init() { app.RegisterModule(Module{}) }

// Module is the conformance fixtures as a module: its tools go into the
// App that loads it, and its prompts, completions and resources into the
// MCP servers built over that App (mcpserver.Extender).
type Module struct{}

// BubModule registers the module as "conformance".
func (Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "conformance", New: func() app.Module { return new(Module) }}
}

// Provision registers the fixture tools.
func (*Module) Provision(ctx context.Context, a *app.App) error {
	for _, t := range fixtures() {
		if err := a.RegisterTool(t); err != nil {
			return err
		}
	}
	return nil
}

// MCPExtensions adds the fixture resources, prompts and completions.
func (*Module) MCPExtensions() []mcpserver.Extension {
	return []mcpserver.Extension{{
		Capabilities: mcpserver.Capabilities{Subscribe: true, Prompts: true, Completions: true},
		Resources:    resources(),
		Templates:    templates(),
		Prompts:      append(prompts(), statelessPrompts()...),
		Complete:     complete,
	}}
}

// fixtures returns new instances of the fixture tools.
func fixtures() []*registry.Tool {
	var ts []*registry.Tool
	add := func(t *registry.Tool) { ts = append(ts, t) }
	add(registry.MustNewTool("echo", "Echo a message back (for benchmarks).",
		func(ctx context.Context, tc *registry.ToolContext, in EchoArgs) (string, error) {
			return "Echo: " + in.Message, nil
		}, readOnly))

	add(noArgs("test_simple_text", "Returns a simple text response.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		return "This is a simple text response for testing.", nil
	}))
	add(noArgs("test_image_content", "Returns an image.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		return registry.Contents{{Type: "image", Data: pngData, MIMEType: "image/png"}}, nil
	}))
	add(noArgs("test_audio_content", "Returns audio.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		return registry.Contents{{Type: "audio", Data: wavData, MIMEType: "audio/wav"}}, nil
	}))
	add(noArgs("test_embedded_resource", "Returns an embedded resource.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		return registry.Contents{{Type: "resource", URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}, nil
	}))
	add(noArgs("test_multiple_content_types", "Returns text, an image and a resource.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		return registry.Contents{
			{Type: "text", Text: "Multiple content types test:"},
			{Type: "image", Data: pngData, MIMEType: "image/png"},
			{Type: "resource", URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`},
		}, nil
	}))
	add(noArgs("test_tool_with_logging", "Sends three log messages while it runs.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				if err := sleep(ctx, 50*time.Millisecond); err != nil {
					return nil, err
				}
			}
			tc.Log(ctx, slog.LevelInfo, "conformance", msg)
		}
		return "Logging test completed", nil
	}))
	add(noArgs("test_error_handling", "Always fails (tests error reporting).", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		return nil, registry.NewError(registry.KindTool, "This tool intentionally returns an error for testing", nil)
	}))
	add(noArgs("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		for i, p := range []float64{0, 50, 100} {
			if i > 0 {
				if err := sleep(ctx, 50*time.Millisecond); err != nil {
					return nil, err
				}
			}
			tc.Progress(ctx, p, 100, fmt.Sprintf("Progress %.0f%%", p))
		}
		return "Progress test completed", nil
	}))
	add(registry.MustNewTool("test_sampling", "Asks the client's model to answer a prompt.",
		func(ctx context.Context, tc *registry.ToolContext, in struct {
			Prompt string `json:"prompt" jsonschema:"description=The prompt to send to the client's model"`
		}) (string, error) {
			res, err := tc.Sample(ctx, registry.SampleRequest{Messages: []registry.SampleMessage{{Role: "user", Text: in.Prompt}}, MaxTokens: 100})
			if err != nil {
				return "", err
			}
			return "LLM response: " + res.Text, nil
		}))
	add(registry.MustNewTool("test_elicitation", "Asks the user for a username and email.",
		func(ctx context.Context, tc *registry.ToolContext, in struct {
			Message string `json:"message" jsonschema:"description=The message shown to the user"`
		}) (string, error) {
			return elicit(ctx, tc, in.Message, `{"type":"object","properties":{"username":{"type":"string","description":"User's response"},"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`)
		}))
	add(noArgs("test_elicitation_sep1034_defaults", "Elicits fields with default values (SEP-1034).", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		return elicit(ctx, tc, "Please review and update the form fields with defaults",
			`{"type":"object","properties":{"name":{"type":"string","description":"User name","default":"John Doe"},"age":{"type":"integer","description":"User age","default":30},"score":{"type":"number","description":"User score","default":95.5},"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},"verified":{"type":"boolean","description":"Verification status","default":true}},"required":[]}`)
	}))
	add(noArgs("test_elicitation_sep1330_enums", "Elicits every enum form (SEP-1330).", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		return elicit(ctx, tc, "Please select options from the enum fields",
			`{"type":"object","properties":{`+
				`"untitledSingle":{"type":"string","description":"Select one option","enum":["option1","option2","option3"]},`+
				`"titledSingle":{"type":"string","description":"Select one option with titles","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},`+
				`"legacyEnum":{"type":"string","description":"Select one option (legacy)","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},`+
				`"untitledMulti":{"type":"array","description":"Select multiple options","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},`+
				`"titledMulti":{"type":"array","description":"Select multiple options with titles","minItems":1,"maxItems":3,"items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}`+
				`},"required":[]}`)
	}))
	add(mustRaw("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json2020, func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return "JSON Schema 2020-12 tool called with: " + string(args), nil
	}))
	add(noArgs("test_reconnection", "Closes its SSE stream mid-call; the result arrives on a resumed GET (SEP-1699).", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		if !mcpserver.CloseStream(ctx) {
			return "Reconnection test completed (this transport cannot close the stream)", nil
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
		return "Reconnection test completed successfully", nil
	}, registry.WithClosesStream()))

	ts = append(ts, statelessFixtures()...)
	return ts
}

var (
	_ app.Provisioner    = (*Module)(nil)
	_ mcpserver.Extender = (*Module)(nil)
)

func mustRaw(name, desc, schema string, h registry.Handler) *registry.Tool {
	t, err := registry.NewRawTool(name, desc, json.RawMessage(schema), h, readOnly)
	if err != nil {
		panic(err)
	}
	return t
}

func elicit(ctx context.Context, tc *registry.ToolContext, message, schema string) (string, error) {
	res, err := tc.Elicit(ctx, registry.ElicitRequest{Message: message, Schema: json.RawMessage(schema)})
	if err != nil {
		return "", err
	}
	content, _ := json.Marshal(res.Content)
	return fmt.Sprintf("User response: action=%s, content=%s", res.Action, content), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// text is a read that answers one text part.
func text(uri, mimeType, body string) mcpserver.ReadFunc {
	return func(context.Context, *providers.Connection, mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
		return []mcpserver.ResourceContents{{URI: uri, MIMEType: mimeType, Text: body}}, nil
	}
}

// resources are the fixture resources.
func resources() []mcpserver.Resource {
	return []mcpserver.Resource{
		{ResourceInfo: mcpserver.ResourceInfo{URI: "test://static-text", Name: "Static Text Resource", Description: "A static text resource for testing", MIMEType: "text/plain"},
			Read: text("test://static-text", "text/plain", "This is the content of the static text resource.")},
		{ResourceInfo: mcpserver.ResourceInfo{URI: "test://static-binary", Name: "Static Binary Resource", Description: "A static binary resource (PNG) for testing", MIMEType: "image/png"},
			Read: func(context.Context, *providers.Connection, mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
				return []mcpserver.ResourceContents{{URI: "test://static-binary", MIMEType: "image/png", Blob: pngData}}, nil
			}},
		{ResourceInfo: mcpserver.ResourceInfo{URI: "test://watched-resource", Name: "Watched Resource", Description: "A resource clients can subscribe to", MIMEType: "text/plain"},
			Read: text("test://watched-resource", "text/plain", "Watched resource content.")},
	}
}

// templates are the fixture resource templates.
func templates() []mcpserver.ResourceTemplate {
	return []mcpserver.ResourceTemplate{{
		URITemplate: "test://template/{id}/data", Name: "Template Resource", Description: "A resource template with an id parameter", MIMEType: "application/json",
		Read: func(ctx context.Context, conn *providers.Connection, req mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
			id, ok := req.Arguments["id"]
			if !ok {
				id = "unknown"
			}
			b, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return []mcpserver.ResourceContents{{URI: req.URI, MIMEType: "application/json", Text: string(b)}}, nil
		},
	}}
}

// user is a prompt message from the user.
func user(c registry.Content) mcpserver.PromptMessage {
	return mcpserver.PromptMessage{Role: "user", Content: c}
}

// userText is a text prompt message from the user.
func userText(s string) mcpserver.PromptMessage { return user(registry.Content{Type: "text", Text: s}) }

// prompts are the fixture prompts.
func prompts() []mcpserver.Prompt {
	return []mcpserver.Prompt{
		{Name: "test_simple_prompt", Description: "A simple prompt without arguments",
			Get: func(context.Context, *providers.Connection, *mcpserver.PromptRequest) (*mcpserver.PromptResult, error) {
				return &mcpserver.PromptResult{Description: "A simple prompt", Messages: []mcpserver.PromptMessage{userText("This is a simple prompt for testing.")}}, nil
			}},
		{Name: "test_prompt_with_arguments", Description: "A prompt with two required arguments",
			Arguments: []mcpserver.PromptArgument{{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}},
			Get: func(ctx context.Context, conn *providers.Connection, req *mcpserver.PromptRequest) (*mcpserver.PromptResult, error) {
				a1, a2 := req.Arguments["arg1"], req.Arguments["arg2"]
				return &mcpserver.PromptResult{Description: "A prompt with arguments", Messages: []mcpserver.PromptMessage{
					userText(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a1, a2))}}, nil
			}},
		{Name: "test_prompt_with_embedded_resource", Description: "A prompt that embeds a resource",
			Arguments: []mcpserver.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}},
			Get: func(ctx context.Context, conn *providers.Connection, req *mcpserver.PromptRequest) (*mcpserver.PromptResult, error) {
				uri := req.Arguments["resourceUri"]
				return &mcpserver.PromptResult{Description: "A prompt with an embedded resource", Messages: []mcpserver.PromptMessage{
					user(registry.Content{Type: "resource", URI: uri, MIMEType: "text/plain", Text: "Embedded resource content for testing."}),
					userText("Please process the embedded resource above."),
				}}, nil
			}},
		{Name: "test_prompt_with_image", Description: "A prompt with an image",
			Get: func(context.Context, *providers.Connection, *mcpserver.PromptRequest) (*mcpserver.PromptResult, error) {
				return &mcpserver.PromptResult{Description: "A prompt with an image", Messages: []mcpserver.PromptMessage{
					user(registry.Content{Type: "image", Data: pngData, MIMEType: "image/png"}),
					userText("Please analyze the image above."),
				}}, nil
			}},
	}
}

// complete completes test_prompt_with_arguments' arguments from a small
// vocabulary, by prefix.
func complete(ctx context.Context, conn *providers.Connection, req mcpserver.CompleteRequest) ([]string, error) {
	words := []string{"paris", "park", "party", "test", "testValue1", "testValue2"}
	out := []string{}
	for _, w := range words {
		if strings.HasPrefix(w, req.Value) {
			out = append(out, w)
		}
	}
	return out, nil
}
