package app_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// Orders is a plugin's module: its exported fields are its own bub.toml
// table, [orders], decoded strictly (a misspelt key is an error naming
// the file and line), and it contributes a tool built over its settings.
type Orders struct {
	Shop string `toml:"shop"`
}

// BubModule names the module and its table.
func (Orders) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "example.orders", Config: "orders", New: func() app.Module { return new(Orders) }}
}

type getArgs struct {
	OrderID string `json:"order_id"`
}

// Provision fills in defaults (one per setting, here) and registers the
// tool into the App being built, so two Apps with different [orders]
// tables are independent.
func (o *Orders) Provision(ctx context.Context, a *app.App) error {
	if o.Shop == "" {
		o.Shop = "main"
	}
	return a.RegisterTool(registry.MustNewTool("orders.get", "Look up an order by id.",
		func(ctx context.Context, tc *registry.ToolContext, in getArgs) (string, error) {
			return fmt.Sprintf("order %s at %s: shipped", in.OrderID, o.Shop), nil
		}))
}

// A plugin registers in init(); a binary compiles it in with one blank
// import next to cli.Main.
func init() { app.RegisterModule(Orders{}) }

// ExampleRegisterModule loads a plugin's module from its bub.toml table and
// calls its tool the way an MCP client's call runs.
func ExampleRegisterModule() {
	home, err := os.MkdirTemp("", "bub-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)
	cfg, err := config.Parse("bub.toml", "[orders]\nshop = \"north\"\n", nil)
	if err != nil {
		log.Fatal(err)
	}
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{"example.orders"},
		Home: home, Workspace: home, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	conn := &providers.Connection{Transport: "stdio"}
	if err := a.Resolve(ctx, conn); err != nil {
		log.Fatal(err)
	}
	res := a.Call(ctx, conn, app.Request{Tool: "orders_get", Args: []byte(`{"order_id":"A123"}`)})
	fmt.Println(res.Output())
	// Output:
	// order A123 at north: shipped
}
