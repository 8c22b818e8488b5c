package builtin_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/bubbuild/bub-mcp/builtin"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// An App gets the builtin tools from the module's Provision; outside an
// App, a Module's Tools go into any registry. A call needs the session's
// Environment in its ToolContext. Results render as Bub's text.
func Example() {
	dir, err := os.MkdirTemp("", "bub-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	env, err := environment.NewLocal(&environment.LocalOptions{Workspace: dir})
	if err != nil {
		panic(err)
	}
	defer env.Close()

	mod := &builtin.Module{} // the zero value has the defaults of an empty [web]
	defer mod.Cleanup()
	reg := registry.New()
	for _, t := range mod.Tools() {
		reg.MustRegister(t)
	}

	ctx := context.Background()
	exec := registry.NewExecutor(reg, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
	tc := &registry.ToolContext{Env: env}
	call := func(tool, args string) string {
		res := exec.Call(ctx, registry.Call{Tool: tool, Args: []byte(args), Context: tc})
		if res.Err != nil {
			return res.Err.Error()
		}
		return res.Text
	}
	call("fs.write", `{"path": "notes.txt", "content": "one\ntwo\nthree\n"}`)
	fmt.Println(call("fs_read", `{"path": "notes.txt", "offset": 1}`))
	fmt.Println(call("bash", `{"command": "wc -l < notes.txt"}`))
	fmt.Println(call("bash", `{"command": "exit 3"}`))
	// Output:
	// two
	// three
	// 3
	// [tool] command exited with code 3
	// output:
	// (no output)
}
