package codemode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// ExampleProvider shows the View a code-mode connection gets: preserved
// tools plus run_code (whose description carries the prompt), while the
// other tools move inside run_code.
func ExampleProvider() {
	home, _ := os.MkdirTemp("", "bub-home-")
	defer os.RemoveAll(home)

	reg := registry.New()
	reg.MustRegister(codemode.RunCodeTool())
	reg.MustRegister(codemode.CodeModeTool())
	handler := func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return "ok", nil
	}
	for _, name := range []string{"fs.read", "orders.get", "tape.info"} {
		var opts []registry.Option
		if name == "fs.read" {
			opts = append(opts, registry.WithPreserve())
		}
		t, _ := registry.NewRawTool(name, "Example tool.", nil, handler, opts...)
		reg.MustRegister(t)
	}

	chain := providers.NewChain(reg, &providers.ChainOptions{CodeMode: codemode.Provider(&codemode.Options{Home: home})})
	for _, on := range []bool{false, true} {
		v, _ := chain.View(context.Background(), &providers.Connection{SessionKey: "demo", Workspace: "/ws", CodeMode: on})
		var direct, code []string
		for _, t := range v.Tools {
			direct = append(direct, t.ModelName())
		}
		for _, t := range v.CodeTools {
			code = append(code, t.ModelName())
		}
		rc, _ := v.Lookup("run_code")
		fmt.Printf("code mode %v: direct %v, code %v, prompt in run_code: %v\n",
			on, direct, code, rc != nil && strings.Contains(rc.Description, v.Instructions))
	}
	// Output:
	// code mode false: direct [fs_read orders_get tape_info], code [], prompt in run_code: false
	// code mode true: direct [fs_read run_code], code [orders_get tape_info], prompt in run_code: true
}
