package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestParseEnvelope(t *testing.T) {
	tests := []struct {
		in      string
		want    envelope
		wantErr bool
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"m":"}\"{"}}}`, want: envelope{ID: json.RawMessage(`1`), Method: "tools/call"}},
		{in: ` { "id" : "a\"b" , "method" : "ping" } `, want: envelope{ID: json.RawMessage(`"a\"b"`), Method: "ping"}},
		{in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, want: envelope{Method: "notifications/initialized"}},
		{in: `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"]"}]}}`, want: envelope{ID: json.RawMessage(`7`), Result: json.RawMessage(`{"content":[{"type":"text","text":"]"}]}`)}},
		{in: `{"id":3,"error":{"code":-1,"message":"no"}}`, want: envelope{ID: json.RawMessage(`3`), Error: &mcp.JSONRPCErrorDetails{Code: -1, Message: "no"}}},
		{in: `{"id":null,"method":"x"}`, want: envelope{ID: json.RawMessage(`null`), Method: "x"}},
		{in: `{"method":"t\u006fols/call","id":1}`, want: envelope{ID: json.RawMessage(`1`), Method: "tools/call"}},
		{in: `{}`, want: envelope{}},
		{in: `{"METHOD":"ping","Id":2}`, want: envelope{ID: json.RawMessage(`2`), Method: "ping"}},
		{in: `not json`, wantErr: true},
		{in: `{"id":1,"method":"x"`, wantErr: true},
		{in: `{"id":1,"method":"x"} trailing`, wantErr: true},
		{in: `[1,2]`, wantErr: true},
		{in: `{"id":1,,"method":"x"}`, wantErr: true},
		{in: `{"method":3}`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseEnvelope([]byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("parseEnvelope(%s) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil {
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseEnvelope(%s) (-want +got):\n%s", tt.in, diff)
			}
		}
	}
}

// FuzzScanEnvelope checks the fast path against encoding/json: whenever
// both read a message, they agree, and the scan never panics.
func FuzzScanEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"a":[1,{"b":"}"}]}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		` {"id" : 1e3 , "method":"a\"b"}`, `{"id":true}`, `{`, `{"a":"\\"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := scanEnvelope(b)
		if !ok {
			return
		}
		var slow envelope
		if json.Unmarshal(b, &slow) != nil {
			return // malformed inside a value: HandleMessage reports it
		}
		if fast.Method != slow.Method || string(fast.ID) != string(slow.ID) || string(fast.Result) != string(slow.Result) {
			t.Errorf("scan %+v, encoding/json %+v for %q", fast, slow, b)
		}
	})
}
