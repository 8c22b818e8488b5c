package upstream

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestParseResultMatchesMCPGo checks that the single-decoding parseResult
// gives what mcp.ParseCallToolResult gives (result or error), for every
// content kind and the edge cases of its content rule.
func TestParseResultMatchesMCPGo(t *testing.T) {
	cases := []struct {
		name, raw string
		wantErr   bool
	}{
		{"text", `{"content":[{"type":"text","text":"Echo: hi"}]}`, false},
		{"every kind", `{"content":[{"type":"text","text":"a","annotations":{"priority":1}},{"type":"image","data":"aGk=","mimeType":"image/png"},` +
			`{"type":"audio","data":"aGk=","mimeType":"audio/wav"},{"type":"resource_link","uri":"file:///x","name":"x"},` +
			`{"type":"resource","resource":{"uri":"file:///y","text":"y","mimeType":"text/plain"}},{"type":"resource","resource":{"uri":"file:///z","blob":"aGk="}}],"_meta":{"k":"v"}}`, false},
		{"structured", `{"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"a":1,"b":[true,null]}}`, false},
		{"is error", `{"content":[{"type":"text","text":"boom"}],"isError":true}`, false},
		{"empty content list", `{"content":[]}`, false},
		{"structured, empty content", `{"content":[],"structuredContent":{"a":1}}`, false},
		{"content missing", `{"structuredContent":{"a":1}}`, true},
		{"content null", `{"content":null}`, false}, // mcp-go takes null for a list
		{"input required without content", `{"resultType":"input_required","requestState":"s","inputRequests":{}}`, false},
		{"content not a list", `{"content":{"type":"text"}}`, true},
		{"part without a type", `{"content":[{"text":"x"}]}`, true},
		{"not an object", `[1]`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := json.RawMessage(c.raw)
			want, wantErr := mcp.ParseCallToolResult(&raw)
			got, err := parseResult(raw)
			if (wantErr != nil) != c.wantErr {
				t.Fatalf("mcp-go's error %v; the case says error=%v", wantErr, c.wantErr)
			}
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("parseResult error %v; mcp-go's %v", err, wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("parseResult differs from mcp.ParseCallToolResult (-mcp-go +ours):\n%s", diff)
			}
		})
	}
}
