package mcpgofix

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestAddToolRefusedDefinition: mcp-go v1.2.1 panics on a tool whose
// x-mcp-header annotation it refuses (the defect; when this half fails,
// upstream fixed it and addtool.go goes); AddTool turns that into an error.
func TestAddToolRefusedDefinition(t *testing.T) {
	bad := mcp.NewToolWithRawSchema("bad", "", json.RawMessage(`{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}`))
	tool := server.ServerTool{Tool: bad, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil }}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("mcp-go accepted the definition without panicking: the defect is fixed upstream, delete addtool.go")
			}
		}()
		server.NewMCPServer("t", "1").AddTools(tool)
	}()
	if err := AddTool(server.NewMCPServer("t", "1"), tool); err == nil {
		t.Error("AddTool = nil for a refused definition")
	}
}

func TestIDKind(t *testing.T) {
	for _, tc := range []struct {
		raw        string
		valid, big bool
	}{
		{`1`, true, false}, {`-7`, true, false}, {`"a"`, true, false},
		{`9007199254740993`, true, true}, {`123456789012345678901234`, true, true},
		{`1.5`, false, false}, {`1e3`, false, false}, {`{"a":1}`, false, false},
		{`null`, false, false}, {`-`, false, false}, {``, false, false}, {`"\x"`, false, false},
	} {
		valid, big := IDKind(json.RawMessage(tc.raw))
		if diff := cmp.Diff([2]bool{tc.valid, tc.big}, [2]bool{valid, big}); diff != "" {
			t.Errorf("IDKind(%s) (-want +got):\n%s", tc.raw, diff)
		}
	}
}

func TestIsBatchAndNullID(t *testing.T) {
	if !IsBatch([]byte(" \n[{}]")) || IsBatch([]byte(`{"id":[1]}`)) {
		t.Error("IsBatch misclassifies")
	}
	if !NullID("ping", json.RawMessage("null")) || NullID("", json.RawMessage("null")) || NullID("ping", nil) {
		t.Error("NullID misclassifies")
	}
	if !NoMethod("", json.RawMessage("9"), nil, false) || NoMethod("ping", json.RawMessage("9"), nil, false) ||
		NoMethod("", json.RawMessage("9"), json.RawMessage("null"), false) || NoMethod("", json.RawMessage("9"), nil, true) ||
		NoMethod("", nil, nil, false) || NoMethod("", json.RawMessage("null"), nil, false) {
		t.Error("NoMethod misclassifies")
	}
}
