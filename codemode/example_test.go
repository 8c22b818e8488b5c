package codemode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// ExampleModule shows the View a code-mode connection gets from an App
// with the codemode module: preserved tools plus run_code (whose
// description carries the prompt), while the other tools move inside
// run_code.
func ExampleModule() {
	home, _ := os.MkdirTemp("", "bub-home-")
	defer os.RemoveAll(home)

	reg := registry.New()
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
	cfg, _ := config.Parse("bub.toml", "[profiles.off]\n[profiles.on]\ncode_mode = true\n", nil)
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: reg, Modules: []string{"codemode"},
		Home: home, Workspace: home, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	for _, profile := range []string{"off", "on"} {
		conn := &providers.Connection{Transport: "example", Profile: profile}
		if err := a.Resolve(context.Background(), conn); err != nil {
			fmt.Println(err)
			return
		}
		v, _ := a.View(context.Background(), conn)
		var direct, code []string
		for _, t := range v.Tools {
			direct = append(direct, t.ModelName())
		}
		for _, t := range v.CodeTools {
			code = append(code, t.ModelName())
		}
		rc, _ := v.Lookup("run_code")
		fmt.Printf("%s: direct %v, code %v, prompt in run_code: %v\n",
			profile, direct, code, rc != nil && strings.Contains(rc.Description, v.Instructions))
	}
	// Output:
	// off: direct [fs_read orders_get tape_info], code [], prompt in run_code: false
	// on: direct [fs_read run_code], code [orders_get tape_info], prompt in run_code: true
}
