package spill_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/bubbuild/bub-mcp/spill"
)

// An App gets spill.read and the hook from the module's Provision; here
// they are wired by hand. A result of 4×threshold characters or more is
// stored in the call's session, and the model reads a reference instead;
// spill.read pages it back.
func Example() {
	home, err := os.MkdirTemp("", "bub-home")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(home)
	store, err := sessions.Open(home, &sessions.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	sess, err := store.Session(home, "example")
	if err != nil {
		panic(err)
	}

	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("yes", "Say y, a lot.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return strings.Repeat("y\n", 20000), nil
	}))
	reg.MustRegister(spill.ReadTool())
	exec := registry.NewExecutor(reg, &registry.ExecutorOptions{Hooks: []registry.Hooks{spill.Hook(spill.DefaultThreshold, nil)}})
	tc := &registry.ToolContext{Session: sess}

	res := exec.Call(context.Background(), registry.Call{Tool: "yes", Args: []byte(`{}`), Context: tc})
	fmt.Println(strings.SplitN(res.Text, ";", 2)[0])
	handle := res.Text[strings.Index(res.Text, "handle: ")+8:][:32]
	page := exec.Call(context.Background(), registry.Call{Tool: "spill.read", Args: []byte(`{"handle":"` + handle + `","from_end":true}`), Context: tc})
	header, _, _ := strings.Cut(page.Text, "\ncontent:")
	fmt.Println(header)
	// Output:
	// [tool output spilled: 40,000 bytes in 3 chunks
	// [spilled tool result: 40,000 bytes, 3 chunks]
	// chunks: 2-2
	// next_cursor: 1
	// complete: false
}
