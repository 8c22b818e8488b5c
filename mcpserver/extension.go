package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Extender is implemented by modules that add protocol features beyond
// tools (the conformance fixtures' prompts and completions, skills); the
// CLI finds it on the App's modules by type assertion.
type Extender interface {
	MCPExtensions() []Extension
}

// Extension adds protocol features beyond tools: resources, resource
// templates, prompts, completions, MCP extensions and request methods.
// Its types are bub-mcp's own; the server maps them onto the SDK.
type Extension struct {
	// Capabilities are what the Extension declares beyond what its
	// Resources, Templates and Prompts imply.
	Capabilities Capabilities
	// Resources are listed by resources/list and read by resources/read.
	Resources []Resource
	// Templates are listed by resources/templates/list; a read of a URI
	// that matches one goes to its Read.
	Templates []ResourceTemplate
	// CallerResources, when set, are resources listed for the caller
	// alone, at the end of resources/list (read through a Template).
	CallerResources func(ctx context.Context, conn *providers.Connection) []ResourceInfo
	// Readable, when set, says per resource URI whether a caller can read
	// it; resources/list leaves out what the caller cannot read.
	Readable map[string]func(ctx context.Context, conn *providers.Connection) bool
	// Prompts are listed by prompts/list and answered by prompts/get.
	Prompts []Prompt
	// Complete, when set, completes prompt arguments (completion/complete);
	// it needs Capabilities.Completions.
	Complete func(ctx context.Context, conn *providers.Connection, req CompleteRequest) ([]string, error)
	// Methods serve request methods the SDK does not know, by name.
	Methods map[string]MethodFunc
	// Live, when set, serves resources, templates and prompts that change
	// while the server runs (live.go).
	Live *Live
}

// Capabilities are server capabilities an Extension declares.
type Capabilities struct {
	// Subscribe lets clients subscribe to resources (resources.subscribe);
	// it declares resources too.
	Subscribe bool
	// Prompts declares prompts even before any is added.
	Prompts bool
	// Completions declares completion/complete.
	Completions bool
	// Extensions are the MCP extensions (capabilities.extensions) the
	// Extension implements, by identifier, with their settings.
	Extensions map[string]any
}

// ResourceInfo describes a resource in resources/list.
type ResourceInfo struct {
	URI, Name, Description, MIMEType string
	// Meta is the resource's _meta, passed on as it is (an MCP App's
	// _meta.ui); nil for none.
	Meta map[string]any
}

// Resource is one resource and how to read it.
type Resource struct {
	ResourceInfo
	Read ReadFunc
	// Group names the Live entries whose visibility Live.Visible decides
	// together; unused outside a Live catalog.
	Group string
}

// ResourceTemplate is a family of resources named by an RFC 6570 URI
// template, and how to read one of them.
type ResourceTemplate struct {
	URITemplate, Name, Description, MIMEType string
	Read                                     ReadFunc
	// Group is as Resource.Group.
	Group string
	// Hidden templates route reads but are never listed (a Live catalog's
	// catch-all for the URIs of one namespace).
	Hidden bool
}

// ReadFunc reads a resource for the caller conn (unresolved, as
// ConnectionFromContext gives it). An error fails resources/read.
type ReadFunc func(ctx context.Context, conn *providers.Connection, req ReadRequest) ([]ResourceContents, error)

// ReadRequest is one resources/read.
type ReadRequest struct {
	URI string
	// Arguments are the values of a template's variables in URI.
	Arguments map[string]string
}

// ResourceContents is one part of a resource read: Text, or Blob for
// binary contents.
type ResourceContents struct {
	URI, MIMEType, Text string
	Blob                []byte
	// Meta is the contents' _meta, passed on as it is; nil for none.
	Meta map[string]any
}

// Prompt is one prompt and how to get it.
type Prompt struct {
	Name, Description string
	Arguments         []PromptArgument
	Get               func(ctx context.Context, conn *providers.Connection, req *PromptRequest) (*PromptResult, error)
	// Group is as Resource.Group.
	Group string
}

// PromptArgument is one argument a prompt takes.
type PromptArgument struct {
	Name, Description string
	Required          bool
}

// PromptRequest is one prompts/get.
type PromptRequest struct {
	Name      string
	Arguments map[string]string
	inputs    mcp.InputResponses
}

// Elicitation is the client's answer to the question the prompt asked
// under key (PromptResult.Elicit), or nil when the request does not carry
// it yet.
func (r *PromptRequest) Elicitation(key string) *registry.ElicitResult {
	res := server.ElicitationResponse(r.inputs, key)
	if res == nil {
		return nil
	}
	return elicitResult(res)
}

// PromptResult is a prompt's answer: its messages, or the questions the
// user must answer first.
type PromptResult struct {
	Description string
	Messages    []PromptMessage
	// Elicit, when set, asks the user first (a multi-round-trip input
	// request on the 2026-07-28 wire; the SDK asks 2025 clients with
	// elicitation/create); the client then gets the prompt again with
	// the answers (PromptRequest.Elicitation). Messages are then unused.
	Elicit []Question
}

// Question is one elicitation a prompt asks, under Key.
type Question struct {
	Key, Message string
	// Schema is the requested schema (a JSON object schema).
	Schema json.RawMessage
}

// PromptMessage is one message of a prompt: a text, image, audio or
// embedded resource, as registry.Content says.
type PromptMessage struct {
	Role    string // "user" or "assistant"
	Content registry.Content
}

// CompleteRequest asks for completions of one argument of a prompt
// (Prompt) or of a resource template (Resource, its URI template).
type CompleteRequest struct {
	Prompt, Resource, Argument, Value string
	// Context holds the values of the prompt's other arguments.
	Context map[string]string
}

// extensionOptions are the SDK options e's Capabilities need.
func extensionOptions(e *Extension) []server.ServerOption {
	var opts []server.ServerOption
	c := e.Capabilities
	if c.Subscribe {
		opts = append(opts, server.WithResourceCapabilities(true, false))
	}
	if c.Prompts {
		opts = append(opts, server.WithPromptCapabilities(false))
	}
	if c.Completions {
		opts = append(opts, server.WithCompletions())
	}
	return opts
}

// addExtension adds e's resources, templates and prompts to s.
func addExtension(s *server.MCPServer, e *Extension) {
	for _, r := range e.Resources {
		s.AddResource(mcpResource(r.ResourceInfo), readHandler(r.Read))
	}
	for _, t := range e.Templates {
		s.AddResourceTemplate(mcpTemplate(t), server.ResourceTemplateHandlerFunc(readHandler(t.Read)))
	}
	for _, p := range e.Prompts {
		s.AddPrompt(mcpPrompt(p), promptHandler(p.Get))
	}
}

func mcpResource(r ResourceInfo) mcp.Resource {
	res := mcp.NewResource(r.URI, r.Name, mcp.WithResourceDescription(r.Description), mcp.WithMIMEType(r.MIMEType))
	if r.Meta != nil {
		res.Meta = &mcp.Meta{AdditionalFields: r.Meta}
	}
	return res
}

func mcpTemplate(t ResourceTemplate) mcp.ResourceTemplate {
	return mcp.NewResourceTemplate(t.URITemplate, t.Name, mcp.WithTemplateDescription(t.Description), mcp.WithTemplateMIMEType(t.MIMEType))
}

func mcpPrompt(p Prompt) mcp.Prompt {
	opts := []mcp.PromptOption{mcp.WithPromptDescription(p.Description)}
	for _, a := range p.Arguments {
		aopts := []mcp.ArgumentOption{mcp.ArgumentDescription(a.Description)}
		if a.Required {
			aopts = append(aopts, mcp.RequiredArgument())
		}
		opts = append(opts, mcp.WithArgument(a.Name, aopts...))
	}
	return mcp.NewPrompt(p.Name, opts...)
}

func readHandler(read ReadFunc) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		var args map[string]string
		for k, v := range req.Params.Arguments {
			if args == nil {
				args = map[string]string{}
			}
			switch x := v.(type) {
			case []string:
				if len(x) > 0 {
					args[k] = x[0]
				}
			case string:
				args[k] = x
			default:
				args[k] = fmt.Sprint(x)
			}
		}
		parts, err := read(ctx, ConnectionFromContext(ctx), ReadRequest{URI: req.Params.URI, Arguments: args})
		if err != nil {
			return nil, err
		}
		out := make([]mcp.ResourceContents, len(parts))
		for i, p := range parts {
			if p.Blob != nil {
				out[i] = mcp.BlobResourceContents{URI: p.URI, MIMEType: p.MIMEType, Blob: base64.StdEncoding.EncodeToString(p.Blob), Meta: p.Meta}
			} else {
				out[i] = mcp.TextResourceContents{URI: p.URI, MIMEType: p.MIMEType, Text: p.Text, Meta: p.Meta}
			}
		}
		return out, nil
	}
}

func promptHandler(get func(context.Context, *providers.Connection, *PromptRequest) (*PromptResult, error)) server.PromptHandlerFunc {
	return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		res, err := get(ctx, ConnectionFromContext(ctx), &PromptRequest{Name: req.Params.Name, Arguments: req.Params.Arguments, inputs: req.Params.InputResponses})
		if err != nil {
			return nil, err
		}
		if len(res.Elicit) > 0 {
			b := server.NewInputRequestBuilder("")
			for _, q := range res.Elicit {
				var schema map[string]any
				if len(q.Schema) > 0 {
					if err := json.Unmarshal(q.Schema, &schema); err != nil {
						return nil, fmt.Errorf("mcpserver: prompt %s: question %s: schema: %w", req.Params.Name, q.Key, err)
					}
				}
				b = b.Elicit(q.Key, mcp.ElicitationParams{Message: q.Message, RequestedSchema: schema})
			}
			return b.PromptResult(), nil
		}
		msgs := make([]mcp.PromptMessage, len(res.Messages))
		for i, m := range res.Messages {
			msgs[i] = mcp.NewPromptMessage(mcp.Role(m.Role), contents(registry.Contents{m.Content})[0])
		}
		return mcp.NewGetPromptResult(res.Description, msgs), nil
	}
}

// completer is the SDK's prompt and resource completion provider over the
// Extensions' Complete: a request goes to the Extension that serves the
// prompt or template it names (a Live one's current catalog included).
type completer struct {
	exts []*Extension
}

// newCompleter is the completer of exts, or nil when none completes.
func newCompleter(exts []Extension) *completer {
	c := &completer{}
	for i := range exts {
		if exts[i].Complete != nil {
			c.exts = append(c.exts, &exts[i])
		}
	}
	if len(c.exts) == 0 {
		return nil
	}
	return c
}

// owner is the Extension serving the prompt (or, with resource, the
// template) name, else the only completing Extension without a Live
// catalog (which may complete names it does not list), or nil.
func (c *completer) owner(name string, resource bool) *Extension {
	var sole *Extension
	n := 0
	for _, e := range c.exts {
		if e.Live == nil {
			sole, n = e, n+1
		}
		var cat Catalog
		cat.Prompts, cat.Templates = e.Prompts, e.Templates
		if e.Live != nil {
			live := e.Live.Catalog()
			cat.Prompts = append(slices.Clip(cat.Prompts), live.Prompts...)
			cat.Templates = append(slices.Clip(cat.Templates), live.Templates...)
		}
		if resource && slices.ContainsFunc(cat.Templates, func(t ResourceTemplate) bool { return t.URITemplate == name }) ||
			!resource && slices.ContainsFunc(cat.Prompts, func(p Prompt) bool { return p.Name == name }) {
			return e
		}
	}
	if n == 1 {
		return sole
	}
	return nil
}

func (c *completer) complete(ctx context.Context, e *Extension, req CompleteRequest) (*mcp.Completion, error) {
	if e == nil {
		return &mcp.Completion{Values: []string{}}, nil
	}
	values, err := e.Complete(ctx, ConnectionFromContext(ctx), req)
	if err != nil {
		return nil, err
	}
	if values == nil {
		values = []string{}
	}
	return &mcp.Completion{Values: values, Total: len(values)}, nil
}

func (c *completer) CompletePromptArgument(ctx context.Context, prompt string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	return c.complete(ctx, c.owner(prompt, false), CompleteRequest{Prompt: prompt, Argument: arg.Name, Value: arg.Value, Context: cctx.Arguments})
}

func (c *completer) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	return c.complete(ctx, c.owner(uri, true), CompleteRequest{Resource: uri, Argument: arg.Name, Value: arg.Value, Context: cctx.Arguments})
}
