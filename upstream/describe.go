package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/bubbuild/bub-mcp/registry"
)

// DescribeName is the tool that loads deferred tools' definitions.
const DescribeName = "tool.describe"

// maxDescribe bounds the names of one tool.describe call.
const maxDescribe = 100

type describeArgs struct {
	Names []string `json:"names" jsonschema_description:"Tools to describe: model names (server_tool) or runtime names (server.tool), as in the catalog."`
}

// Definition is one tool as tool.describe returns it.
type Definition struct {
	Name         string               `json:"name"`
	RuntimeName  string               `json:"runtime_name"`
	Description  string               `json:"description"`
	InputSchema  json.RawMessage      `json:"input_schema"`
	OutputSchema json.RawMessage      `json:"output_schema,omitempty"`
	Annotations  registry.Annotations `json:"annotations"`
}

type describeResult struct {
	Tools []Definition `json:"tools"`
	// Loaded are the deferred tools now listed for the session.
	Loaded []string `json:"loaded,omitempty"`
}

// describeTool is tool.describe (Bub 0.5's): it returns the full
// definitions of tools in the caller's scope, and loads the deferred ones
// among them into the session (tool.definitions.loaded on its tape), whose
// tools/list includes them from then on. It is registered when some
// upstream is deferred, and stays direct in code mode.
func (m *Module) describeTool() *registry.Tool {
	return registry.MustNewTool(DescribeName, "Load the full definitions (description, input and output schema) of tools named in the catalog of deferred tools; they are then listed and can be called.",
		func(ctx context.Context, tc *registry.ToolContext, in describeArgs) (describeResult, error) {
			if len(in.Names) == 0 {
				return describeResult{}, registry.NewError(registry.KindInvalidInput, "names: give at least one tool name", nil)
			}
			if len(in.Names) > maxDescribe {
				return describeResult{}, registry.NewError(registry.KindInvalidInput, fmt.Sprintf("names: at most %d tools per call", maxDescribe), nil)
			}
			if tc == nil || tc.Conn == nil || tc.Session == nil {
				return describeResult{}, registry.NewError(registry.KindConfig, "tool.describe needs a caller with a session", nil)
			}
			v, err := m.app.View(ctx, tc.Conn)
			if err != nil {
				return describeResult{}, err
			}
			var out describeResult
			var unknown []string
			for _, name := range in.Names {
				t, ok := v.Lookup(name)
				if !ok {
					t, ok = v.LookupCode(name)
				}
				if !ok {
					unknown = append(unknown, name)
					continue
				}
				out.Tools = append(out.Tools, Definition{Name: t.ModelName(), RuntimeName: t.Name, Description: t.Description,
					InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations})
				if slices.Contains(v.Deferred, t) && !slices.Contains(out.Loaded, t.Name) {
					out.Loaded = append(out.Loaded, t.Name)
				}
			}
			if len(unknown) > 0 {
				return describeResult{}, registry.NewError(registry.KindNotFound, "unknown tool name(s): '"+strings.Join(unknown, "', '")+"'", nil)
			}
			if err := m.app.LoadTools(tc.Session, tc.Conn, out.Loaded); err != nil {
				return describeResult{}, err
			}
			return out, nil
		},
		registry.WithPreserve(),
		registry.WithAnnotations(registry.Annotations{Title: "Describe tools", ReadOnly: true, Idempotent: true}))
}
