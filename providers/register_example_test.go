package providers_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// A plugin registers a provider in init(); a profile picks it with
// providers = ["readonly_first"].
func init() {
	providers.Register("readonly_first", func(ctx context.Context, conn *providers.Connection, tools []*registry.Tool) ([]*registry.Tool, string, error) {
		var ro, rest []*registry.Tool
		for _, t := range tools {
			if t.Annotations.ReadOnly {
				ro = append(ro, t)
			} else {
				rest = append(rest, t)
			}
		}
		return append(ro, rest...), "Prefer read-only tools.", nil
	})
}

// ExampleRegister runs a registered provider over a connection's tools,
// as the App does after scope and code mode.
func ExampleRegister() {
	noop := func(context.Context, *registry.ToolContext, struct{}) (string, error) { return "", nil }
	tools := []*registry.Tool{
		registry.MustNewTool("fs.write", "Write a file.", noop),
		registry.MustNewTool("fs.read", "Read a file.", noop, registry.WithAnnotations(registry.Annotations{ReadOnly: true})),
	}
	out, prompt, err := providers.Run(context.Background(), []string{"readonly_first"}, &providers.Connection{Profile: "default"}, tools)
	if err != nil {
		fmt.Println(err)
		return
	}
	names := make([]string, len(out))
	for i, t := range out {
		names[i] = t.Name
	}
	fmt.Println(strings.Join(names, " "), "|", prompt)
	// Output:
	// fs.read fs.write | Prefer read-only tools.
}
