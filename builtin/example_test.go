package builtin_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	_ "github.com/bubbuild/bub-mcp/builtin" // registers the builtin tools
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// The builtin tools register themselves; a call needs the session's
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

	ctx := context.Background()
	exec := registry.NewExecutor(registry.Default, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
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
