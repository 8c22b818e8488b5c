package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/google/go-cmp/cmp"
)

// TestStdioOversizeAnswersItsID sends lines over max_message_bytes: the
// refusal carries the request's id when it can be read from the line's
// start, so the client's request resolves; otherwise id null. Without
// idFromPrefix every refusal said null.
func TestStdioOversizeAnswersItsID(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	p := startStdio(t, boundsServer(t, mcpserver.Limits{MaxMessageBytes: 4096}, release))
	p.send(initLine)
	if m := p.recv(); m["result"] == nil {
		t.Fatalf("initialize = %v", m)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	huge := `"` + strings.Repeat("x", 10000) + `"`
	hugeParams := `{"name":"test_echo","arguments":{"message":` + huge + `,"nested":[{"a":[1,2]}]}}`
	tests := []struct {
		name, line string
		want       any // the answer's id
	}{
		{"integer id first", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + hugeParams + `}`, json.Number("7")},
		{"string id", `{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":` + hugeParams + `}`, "call-7"},
		{"id after the method", `{ "method" : "tools/call", "jsonrpc":"2.0", "id" : -3, "params":` + hugeParams + `}`, json.Number("-3")},
		{"id after small nested values", `{"jsonrpc":"2.0","method":"tools/call","x":{"y":[1,{"z":null}]},"id":8,"params":` + hugeParams + `}`, json.Number("8")},
		{"large integer id", `{"jsonrpc":"2.0","id":12345678901234567890123,"method":"tools/call","params":` + hugeParams + `}`, json.Number("12345678901234567890123")},
		{"id after a huge params", `{"jsonrpc":"2.0","method":"tools/call","params":` + hugeParams + `,"id":9}`, nil},
		{"an id inside params only", `{"jsonrpc":"2.0","method":"tools/call","params":{"id":10,"pad":` + huge + `}}`, nil},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":` + hugeParams + `}`, nil},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":` + hugeParams + `}`, nil},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":` + hugeParams + `}`, nil},
		{"huge string id", `{"jsonrpc":"2.0","id":` + huge + `,"method":"tools/call"}`, nil},
		{"no object", `[` + huge + `]`, nil},
		{"no JSON", strings.Repeat("y", 5000), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.send(tt.line)
			m := p.recv()
			code, msg := errorOf(m)
			if code != "-32600" || !strings.Contains(msg, "max_message_bytes") {
				t.Errorf("answer %v; want -32600 naming max_message_bytes", m)
			}
			if diff := cmp.Diff(tt.want, m["id"]); diff != "" {
				t.Errorf("answer's id (-want +got):\n%s", diff)
			}
		})
	}
	// The connection keeps serving.
	p.send(callLine("11", "test_echo", `{"message":"after"}`))
	if m := p.recv(); m["id"] != json.Number("11") || m["result"] == nil {
		t.Errorf("call after the oversized lines = %v", m)
	}
}
