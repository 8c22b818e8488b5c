package codemode_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// TestNestedErrorDetails checks that a nested call's failure tells the
// code what went wrong, not only that it did: the details a direct call's
// result carries (the validator's {loc, msg} pairs, a handler's own
// error) follow the "[kind] message" line of the raised BubError.
func TestNestedErrorDetails(t *testing.T) {
	needPython(t)
	reg := providerRegistry(t)
	reg.MustRegister(rawTool(t, "disk.write", func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return nil, errors.New("disk full: 0 bytes left on /data")
	}))
	reg.MustRegister(rawTool(t, "plain.fail", func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		return nil, registry.NewError(registry.KindTemporary, "try again later", nil)
	}))
	a, _ := newApp(t, appOptions{reg: reg, modules: codeModeOnly})
	catch := func(call string) string {
		return "try:\n    await tools." + call + "\nexcept Exception as e:\n    print(e)"
	}
	tests := []struct {
		name, code, want string
	}{
		{"missing argument", catch("orders_get()"),
			"[invalid_input] Tool 'orders_get' argument validation failed.\n" +
				`{"errors":[{"loc":"/order_id","msg":"missing property 'order_id'"}]}` + "\n"},
		{"wrong type", catch("orders_get(order_id=[1])"),
			"[invalid_input] Tool 'orders_get' argument validation failed.\n" +
				`{"errors":[{"loc":"/order_id","msg":"got array, want string"}]}` + "\n"},
		{"unknown argument", catch("orders_get(order_id='1', colour='red')"),
			"[invalid_input] Tool 'orders_get' argument validation failed.\n" +
				`{"errors":[{"loc":"","msg":"additional properties 'colour' not allowed"}]}` + "\n"},
		{"handler error", catch("disk_write()"),
			"[tool] Tool 'disk.write' execution failed.\n" + `{"error":"disk full: 0 bytes left on /data"}` + "\n"},
		{"no details", catch("plain_fail()"), "[temporary] try again later\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCode(t, context.Background(), a, nil, tt.code, 0)
			if res.Err != nil {
				t.Fatalf("run_code error: %v %v", res.Err, res.Err.Details)
			}
			if diff := cmp.Diff(tt.want, res.Text); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
