package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/bubbuild/bub-mcp/registry"
)

type orderArgs struct {
	OrderID string `json:"order_id" jsonschema_description:"Complete order ID, such as A123"`
}

type order struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func getOrder(ctx context.Context, tc *registry.ToolContext, in orderArgs) (order, error) {
	return order{ID: in.OrderID, Status: "shipped"}, nil
}

// A tool is a typed Go function; its schemas are reflected from In and Out
// and its renderer decides what a model reads.
func ExampleNewTool() {
	tool := registry.MustNewTool("orders.get", "Look up an order by id.", getOrder,
		registry.WithRenderer(func(o order) string { return fmt.Sprintf("order %s: %s", o.ID, o.Status) }),
		registry.WithAnnotations(registry.Annotations{ReadOnly: true, Idempotent: true}))
	fmt.Println(tool.ModelName())
	fmt.Println(string(tool.InputSchema))

	reg := registry.New()
	reg.MustRegister(tool)
	exec := registry.NewExecutor(reg, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
	res := exec.Call(context.Background(), registry.Call{Tool: "orders_get", Args: json.RawMessage(`{"order_id":"A123"}`)})
	fmt.Println(res.Text)
	// Output:
	// orders_get
	// {"properties":{"order_id":{"type":"string","description":"Complete order ID, such as A123"}},"additionalProperties":false,"type":"object","required":["order_id"]}
	// order A123: shipped
}

// Plugins register their tools from init(), like database/sql drivers; a
// binary enables a plugin with a blank import of its package.
func Example_register() {
	reg := registry.New() // plugins use registry.MustRegister (the Default registry)
	reg.MustRegister(registry.MustNewTool("orders.get", "Look up an order by id.", getOrder))
	reg.AddHooks(registry.Hooks{Name: "audit", Before: func(ctx context.Context, call *registry.ToolCall) registry.Decision {
		fmt.Println("calling", call.Name)
		return registry.Proceed()
	}})
	exec := registry.NewExecutor(reg, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
	res := exec.Call(context.Background(), registry.Call{Tool: "orders.get", Args: json.RawMessage(`{"order_id":"B7"}`)})
	fmt.Println(res.Text)
	// Output:
	// calling orders_get
	// {"id":"B7","status":"shipped"}
}
