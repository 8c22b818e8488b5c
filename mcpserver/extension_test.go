package mcpserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// testExtension offers one resource of each kind, a template, a prompt
// with arguments and an image, a prompt that asks the user first, and
// completions.
func testExtension() mcpserver.Extension {
	png := []byte{0x89, 'P', 'N', 'G'}
	return mcpserver.Extension{
		Capabilities: mcpserver.Capabilities{Subscribe: true, Prompts: true, Completions: true},
		Resources: []mcpserver.Resource{
			{ResourceInfo: mcpserver.ResourceInfo{URI: "test://text", Name: "text", MIMEType: "text/plain"},
				Read: func(ctx context.Context, conn *providers.Connection, req mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
					return []mcpserver.ResourceContents{{URI: req.URI, MIMEType: "text/plain", Text: "for " + conn.Profile}}, nil
				}},
			{ResourceInfo: mcpserver.ResourceInfo{URI: "test://blob", Name: "blob", MIMEType: "image/png"},
				Read: func(ctx context.Context, conn *providers.Connection, req mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
					return []mcpserver.ResourceContents{{URI: req.URI, MIMEType: "image/png", Blob: png}}, nil
				}},
		},
		Templates: []mcpserver.ResourceTemplate{{URITemplate: "test://item/{id}", Name: "item",
			Read: func(ctx context.Context, conn *providers.Connection, req mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
				return []mcpserver.ResourceContents{{URI: req.URI, Text: "item " + req.Arguments["id"]}}, nil
			}}},
		Prompts: []mcpserver.Prompt{
			{Name: "greet", Description: "Greets.", Arguments: []mcpserver.PromptArgument{{Name: "who", Required: true}},
				Get: func(ctx context.Context, conn *providers.Connection, req *mcpserver.PromptRequest) (*mcpserver.PromptResult, error) {
					return &mcpserver.PromptResult{Description: "a greeting", Messages: []mcpserver.PromptMessage{
						{Role: "user", Content: registry.Content{Type: "text", Text: "hello " + req.Arguments["who"]}},
						{Role: "assistant", Content: registry.Content{Type: "image", Data: png, MIMEType: "image/png"}},
					}}, nil
				}},
			{Name: "ask", Description: "Asks first.",
				Get: func(ctx context.Context, conn *providers.Connection, req *mcpserver.PromptRequest) (*mcpserver.PromptResult, error) {
					a := req.Elicitation("topic")
					if a == nil {
						return &mcpserver.PromptResult{Elicit: []mcpserver.Question{{Key: "topic", Message: "Which topic?",
							Schema: json.RawMessage(`{"type":"object","properties":{"topic":{"type":"string"}}}`)}}}, nil
					}
					return &mcpserver.PromptResult{Messages: []mcpserver.PromptMessage{
						{Role: "user", Content: registry.Content{Type: "text", Text: fmt.Sprintf("%s: %v", a.Action, a.Content["topic"])}}}}, nil
				}},
		},
		Complete: func(ctx context.Context, conn *providers.Connection, req mcpserver.CompleteRequest) ([]string, error) {
			var out []string
			for _, w := range []string{"ada", "alan", "grace"} {
				if strings.HasPrefix(w, req.Value) {
					out = append(out, req.Prompt+"/"+req.Argument+"="+w)
				}
			}
			return out, nil
		},
	}
}

type topicElicitor struct{}

func (topicElicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"topic": "go (" + req.Params.Message + ")"}}}, nil
}

// TestExtension serves an Extension's resources, templates, prompts and
// completions to an mcp-go client, with the capabilities it declares; the
// prompt that asks first is answered through elicitation (the 2025 era's
// way of the SDK's input requests).
func TestExtension(t *testing.T) {
	h := newHost(t, registry.New(), "")
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler), Extensions: []mcpserver.Extension{testExtension()}})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- stdio.Serve(ctx, srv, inR, outW, providers.Connection{Profile: "default"}, time.Second)
	}()
	defer func() { inW.Close(); <-served }()
	c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(nil)), client.WithProtocolVersion(legacy), client.WithElicitationHandler(topicElicitor{}))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init, err := c.Initialize(ctx, mcp.InitializeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	caps := init.Capabilities
	if caps.Resources == nil || !caps.Resources.Subscribe || caps.Prompts == nil || caps.Completions == nil {
		t.Errorf("capabilities: resources %+v, prompts %+v, completions %+v; want resources with subscribe, prompts and completions", caps.Resources, caps.Prompts, caps.Completions)
	}

	list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
	}
	if diff := cmp.Diff([]string{"test://blob", "test://text"}, uris); diff != "" {
		t.Errorf("resources/list (-want +got):\n%s", diff)
	}
	read := func(uri string) mcp.ResourceContents {
		t.Helper()
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(ctx, req)
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("resources/read %s = %v, %v; want one part", uri, res, err)
		}
		return res.Contents[0]
	}
	if got, ok := read("test://text").(mcp.TextResourceContents); !ok || got.Text != "for default" {
		t.Errorf("test://text = %#v; want the text for the caller's profile", got)
	}
	if got, ok := read("test://blob").(mcp.BlobResourceContents); !ok || got.Blob != base64.StdEncoding.EncodeToString([]byte{0x89, 'P', 'N', 'G'}) || got.MIMEType != "image/png" {
		t.Errorf("test://blob = %#v; want the PNG bytes, base64", got)
	}
	if got, ok := read("test://item/42").(mcp.TextResourceContents); !ok || got.Text != "item 42" || got.URI != "test://item/42" {
		t.Errorf("test://item/42 = %#v; want the template's read with id 42", got)
	}

	greq := mcp.GetPromptRequest{}
	greq.Params.Name, greq.Params.Arguments = "greet", map[string]string{"who": "ada"}
	greet, err := c.GetPrompt(ctx, greq)
	if err != nil {
		t.Fatal(err)
	}
	if len(greet.Messages) != 2 || greet.Description != "a greeting" {
		t.Fatalf("greet = %+v; want two messages", greet)
	}
	if txt, ok := greet.Messages[0].Content.(mcp.TextContent); !ok || txt.Text != "hello ada" || greet.Messages[0].Role != mcp.RoleUser {
		t.Errorf("greet's first message = %+v; want the user's text", greet.Messages[0])
	}
	if img, ok := greet.Messages[1].Content.(mcp.ImageContent); !ok || img.MIMEType != "image/png" || greet.Messages[1].Role != mcp.RoleAssistant {
		t.Errorf("greet's second message = %+v; want the assistant's image", greet.Messages[1])
	}

	areq := mcp.GetPromptRequest{}
	areq.Params.Name = "ask"
	ask, err := c.GetPrompt(ctx, areq)
	if err != nil {
		t.Fatal(err)
	}
	if len(ask.Messages) != 1 {
		t.Fatalf("ask = %+v; want one message", ask)
	}
	if txt, ok := ask.Messages[0].Content.(mcp.TextContent); !ok || txt.Text != "accept: go (Which topic?)" {
		t.Errorf("ask's message = %+v; want the elicited topic", ask.Messages[0].Content)
	}

	creq := mcp.CompleteRequest{}
	creq.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "greet"}
	creq.Params.Argument.Name, creq.Params.Argument.Value = "who", "a"
	comp, err := c.Complete(ctx, creq)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"greet/who=ada", "greet/who=alan"}, comp.Completion.Values); diff != "" {
		t.Errorf("completion/complete (-want +got):\n%s", diff)
	}
}

// TestExtensionPromptInputRequired: on the 2026-07-28 wire a prompt's
// questions are an input_required result, and the client's next request
// carries the answers the prompt reads.
func TestExtensionPromptInputRequired(t *testing.T) {
	h := newHost(t, registry.New(), "")
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler), Extensions: []mcpserver.Extension{testExtension()}})
	if err != nil {
		t.Fatal(err)
	}
	ex := stdioExchange(t, srv)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"m","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	_, r1 := ex(t, "", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"ask",`+meta+`}}`)
	res1, _ := r1["result"].(map[string]any)
	if res1["resultType"] != "input_required" {
		t.Fatalf("round 1 = %v; want input_required", r1)
	}
	if diff := cmp.Diff([]string{"topic"}, keys(res1["inputRequests"])); diff != "" {
		t.Fatalf("round 1 questions (-want +got):\n%s", diff)
	}
	_, r2 := ex(t, "", `{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"ask","inputResponses":{"topic":{"action":"accept","content":{"topic":"rust"}}},`+meta+`}}`)
	res2, _ := r2["result"].(map[string]any)
	msgs, _ := res2["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("round 2 = %v; want one message", r2)
	}
	content, _ := msgs[0].(map[string]any)["content"].(map[string]any)
	if content["text"] != "accept: rust" {
		t.Errorf("round 2 message = %v; want the answered topic", msgs[0])
	}
}
