package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/registry"
)

// A plugin's tool, registered as plugins do, that shows the caller's
// request-scoped state.
func init() {
	registry.MustRegister(registry.MustNewTool("test.state", "Show the request id.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return fmt.Sprintf("request_id=%v", tc.State["request_id"]), nil
	}))
}

func TestCallState(t *testing.T) {
	home := t.TempDir()
	tests := []struct {
		args       []string
		code       int
		out, inErr string
	}{
		{args: []string{"call", "--state", "request_id=req-01", "test.state"}, out: "request_id=req-01\n"},
		{args: []string{"call", "test.state"}, out: "request_id=<nil>\n"},
		{args: []string{"call", "--state", "request_id", "test.state"}, code: 2, inErr: `want key=value, got "request_id"`},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, home, tt.args...)
		if code != tt.code || out != tt.out || !strings.Contains(errOut, tt.inErr) {
			t.Errorf("%v: exit %d, %q, %q; want exit %d, %q, stderr containing %q", tt.args, code, out, errOut, tt.code, tt.out, tt.inErr)
		}
	}
}
