package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/mcp"
)

// maxModelName is the model-name limit every major model API enforces.
const maxModelName = 64

// sanitize maps an upstream tool name onto the model-name alphabet
// [a-zA-Z0-9_-]: every other character (dots included, which would read
// as namespaces) becomes "_".
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// RuntimeName is the registry name of an upstream server's tool,
// "<server>.<tool>" with the tool's name sanitised; a name whose model
// form would pass 64 characters is cut and ends in a hash of the
// original, so it stays unique and stable.
func RuntimeName(server, tool string) string {
	t := sanitize(tool)
	if len(server)+1+len(t) <= maxModelName {
		return server + "." + t
	}
	sum := sha256.Sum256([]byte(tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	keep := maxModelName - len(server) - 1 - len(suffix)
	return server + "." + t[:keep] + suffix
}

// definition is one upstream tool as its server listed it: the typed
// definition for the hints and metadata, and the schemas as raw JSON,
// which are passed on byte for byte.
type definition struct {
	tool   mcp.Tool
	input  json.RawMessage
	output json.RawMessage
}

// parseDefinition decodes one entry of a tools/list result.
func parseDefinition(raw json.RawMessage) (definition, error) {
	var d definition
	var schemas struct {
		Input  json.RawMessage `json:"inputSchema"`
		Output json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal(raw, &schemas); err != nil {
		return d, err
	}
	if err := json.Unmarshal(raw, &d.tool); err != nil {
		return d, err
	}
	if d.tool.Name == "" {
		return d, fmt.Errorf("a tool without a name")
	}
	d.input, d.output = schemas.Input, schemas.Output
	if string(d.output) == "null" {
		d.output = nil
	}
	// The typed copies are dropped: the raw ones are what is sent.
	d.tool.InputSchema, d.tool.OutputSchema = mcp.ToolInputSchema{}, mcp.ToolOutputSchema{}
	return d, nil
}

// MCPTool is the definition as the upstream gave it, for transports
// (mcpserver presents it with its hints unchanged).
func (d definition) MCPTool() mcp.Tool {
	t := d.tool
	t.RawInputSchema = d.input
	if len(d.output) > 0 {
		t.RawOutputSchema = d.output
	}
	return t
}

// annotations maps MCP hints onto the registry's, with MCP's defaults
// for absent ones (destructive and open-world unless said otherwise).
func annotations(a mcp.ToolAnnotation, title string) registry.Annotations {
	get := func(p *bool, def bool) bool {
		if p == nil {
			return def
		}
		return *p
	}
	if a.Title != "" {
		title = a.Title
	}
	return registry.Annotations{
		Title:       title,
		ReadOnly:    get(a.ReadOnlyHint, false),
		Destructive: get(a.DestructiveHint, true),
		Idempotent:  get(a.IdempotentHint, false),
		OpenWorld:   get(a.OpenWorldHint, true),
	}
}

// Result is an upstream tool's successful result, kept whole: transports
// that know it send it on as the upstream sent it (Source, MCPResult),
// models read its text (Render), and code in run_code gets its
// structuredContent, else its only text, else its content list (JSON).
type Result struct {
	r    *mcp.CallToolResult
	text string // renderResult(r), made once: the executor renders, MCPResult compares
}

func newResult(r *mcp.CallToolResult) *Result { return &Result{r: r, text: renderResult(r)} }

// MCP returns the upstream's result.
func (r *Result) MCP() *mcp.CallToolResult { return r.r }

// MCPResult is the result to send a client: the upstream's own, unless a
// hook replaced its text (spill), when the text goes instead, with the
// structured content kept.
func (r *Result) MCPResult(text string) *mcp.CallToolResult {
	if text == r.text {
		return r.r
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, StructuredContent: r.r.StructuredContent}
}

// MarshalJSON is what code mode's Python sees.
func (r *Result) MarshalJSON() ([]byte, error) {
	if r.r.StructuredContent != nil {
		if len(r.r.RawStructuredContent) > 0 {
			return r.r.RawStructuredContent, nil
		}
		return json.Marshal(r.r.StructuredContent)
	}
	if len(r.r.Content) == 1 {
		if t, ok := mcp.AsTextContent(r.r.Content[0]); ok {
			return json.Marshal(t.Text)
		}
	}
	if r.r.Content == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(r.r.Content)
}

// renderResult is the text a model reads: the text parts, a line per
// other part, or the structured content as JSON when there is nothing
// else.
func renderResult(r *mcp.CallToolResult) string {
	if len(r.Content) == 1 {
		// One part, the usual case: its text as it is, not a copy.
		if t := contentText(r.Content[0]); t != "" {
			return t
		}
	}
	var b strings.Builder
	for i, c := range r.Content {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(contentText(c))
	}
	if b.Len() == 0 && r.StructuredContent != nil {
		if raw, err := json.Marshal(r.StructuredContent); err == nil {
			b.Write(raw)
		}
	}
	return b.String()
}

// contentText renders one content part for a model.
func contentText(c mcp.Content) string {
	switch x := c.(type) {
	case mcp.TextContent:
		return x.Text
	case *mcp.TextContent:
		return x.Text
	case mcp.ImageContent:
		return fmt.Sprintf("[image: %s, %d base64 bytes]", x.MIMEType, len(x.Data))
	case *mcp.ImageContent:
		return fmt.Sprintf("[image: %s, %d base64 bytes]", x.MIMEType, len(x.Data))
	case mcp.AudioContent:
		return fmt.Sprintf("[audio: %s, %d base64 bytes]", x.MIMEType, len(x.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio: %s, %d base64 bytes]", x.MIMEType, len(x.Data))
	case mcp.ResourceLink:
		return fmt.Sprintf("[resource link %s: %s]", x.URI, x.Name)
	case *mcp.ResourceLink:
		return fmt.Sprintf("[resource link %s: %s]", x.URI, x.Name)
	case mcp.EmbeddedResource:
		return resourceText(x.Resource)
	case *mcp.EmbeddedResource:
		return resourceText(x.Resource)
	}
	raw, _ := json.Marshal(c)
	return string(raw)
}

func resourceText(r mcp.ResourceContents) string {
	switch x := r.(type) {
	case mcp.TextResourceContents:
		return fmt.Sprintf("[resource %s]\n%s", x.URI, x.Text)
	case *mcp.TextResourceContents:
		return fmt.Sprintf("[resource %s]\n%s", x.URI, x.Text)
	case mcp.BlobResourceContents:
		return fmt.Sprintf("[resource %s: %s, %d base64 bytes]", x.URI, x.MIMEType, len(x.Blob))
	case *mcp.BlobResourceContents:
		return fmt.Sprintf("[resource %s: %s, %d base64 bytes]", x.URI, x.MIMEType, len(x.Blob))
	}
	raw, _ := json.Marshal(r)
	return "[resource] " + string(raw)
}

// toolError is an upstream's isError result, as the cause of the call's
// tool error: transports that know it send the result as it came.
type toolError struct {
	r    *mcp.CallToolResult
	text string // errorText(r), made once
}

func newToolError(r *mcp.CallToolResult) *toolError { return &toolError{r: r, text: errorText(r)} }

func (e *toolError) Error() string { return e.text }

// MCPResult is the upstream's result, unless a hook replaced the error's
// message (spill), when that message goes instead.
func (e *toolError) MCPResult(text string) *mcp.CallToolResult {
	if text == e.text {
		return e.r
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: true}
}

// errorText is the text of an isError result, for the tool error.
func errorText(r *mcp.CallToolResult) string {
	if t := renderResult(r); t != "" {
		return t
	}
	return "the upstream tool reported an error without a message"
}
