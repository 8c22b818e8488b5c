package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/bubbuild/bub-mcp/codemode/runner"
)

func ExampleRunner_Run() {
	r := runner.New(&runner.Options{
		Start:    runner.LocalStart(os.TempDir(), nil), // the workspace
		Prestart: true,
	})
	defer r.Close()

	code := `
import asyncio
orders = await asyncio.gather(*(tools.orders_get(order_id=i) for i in ("1", "2")))
for order in orders:
    print(order["id"], order["status"])
try:
    await tools.orders_cancel(order_id="1")
except Exception as e:
    print(e)
`
	out, err := r.Run(context.Background(), runner.Request{
		Code:  code,
		Tools: []string{"orders_get", "orders_cancel"},
		Call: func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
			if name == "orders_cancel" {
				return nil, errors.New("[tool] not allowed")
			}
			var in struct {
				OrderID string `json:"order_id"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, fmt.Errorf("[invalid_input] %v", err)
			}
			return json.Marshal(map[string]string{"id": in.OrderID, "status": "shipped"})
		},
		Timeout: 30 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(out)
	// Output:
	// 1 shipped
	// 2 shipped
	// [tool] not allowed
}

func ExampleCodeError() {
	r := runner.New(nil)
	defer r.Close()

	out, err := r.Run(context.Background(), runner.Request{
		Code:    "print('checking')\nraise ValueError('bad input')",
		Timeout: 30 * time.Second,
	})
	var ce *runner.CodeError
	if errors.As(err, &ce) {
		fmt.Println(err)
		fmt.Printf("output: %q\n", out)
	}
	// Output:
	// Code raised ValueError: bad input
	// output: "checking\n"
}
