package app

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// encodeMap is how the audit entries used to be written: maps through
// encoding/json, HTML escaping off, as tape lines are.
func encodeMap(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func TestAuditEncoding(t *testing.T) {
	tests := []struct {
		name string
		conn providers.Connection
		args string
		res  registry.Result
	}{
		{"plain", providers.Connection{Transport: "stdio", Profile: "default"}, `{"message":"hello"}`, registry.Result{Text: "Echo: hello", Duration: 3 * time.Millisecond}},
		{"client and principal", providers.Connection{Transport: "http", Profile: "ro", Principal: "ci", ClientName: "claude \"desk\"", ClientVersion: "1.0"}, "{\n  \"path\": \"a<b>&c\"\n}", registry.Result{Text: "line1\nline2\t\u2028 <html> é"}},
		{"no args", providers.Connection{Transport: "cli", Profile: "p"}, ``, registry.Result{Err: &registry.Error{Kind: registry.KindTool, Message: "boom"}}},
		{"nested args", providers.Connection{Transport: "agent", Profile: "p"}, `{"a":[1, 2.5e3, {"b": null}], "c": "\u00e9\n"}`, registry.Result{Text: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runID := "stdio-7"
			meta := map[string]any{"run_id": runID, "transport": tt.conn.Transport, "profile": tt.conn.Profile}
			if tt.conn.Principal != "" {
				meta["principal"] = tt.conn.Principal
			}
			if tt.conn.ClientName != "" {
				meta["client"] = tt.conn.ClientName + "/" + tt.conn.ClientVersion
			}
			var args any = json.RawMessage(tt.args)
			if tt.args == "" {
				args = map[string]any{}
			}
			call := map[string]any{"calls": []any{map[string]any{"id": runID, "type": "function", "function": map[string]any{"name": "fs_read", "arguments": args}}}}
			status := "ok"
			if tt.res.Err != nil {
				status = "error"
			}
			result := map[string]any{"results": []any{map[string]any{"call_id": runID, "output": tt.res.Output(), "status": status, "elapsed_ms": tt.res.Duration.Milliseconds()}}}

			got := []string{
				string(auditMeta(&tt.conn, runID)),
				string(auditCall(runID, "fs_read", json.RawMessage(tt.args))),
				string(auditResult(runID, &tt.res)),
			}
			want := []string{encodeMap(t, meta), encodeMap(t, call), encodeMap(t, result)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("encoding differs (-maps +direct):\n%s", diff)
			}
		})
	}
}

func TestAuditCallKeepsArgumentsThatAreNotJSON(t *testing.T) {
	got := auditCall("cli-1", "bash", json.RawMessage(`{"command": "ls`))
	var v struct {
		Calls []struct {
			Function struct{ Arguments string }
		}
	}
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("entry is not JSON: %v\n%s", err, got)
	}
	if v.Calls[0].Function.Arguments != `{"command": "ls` {
		t.Errorf("arguments = %q", v.Calls[0].Function.Arguments)
	}
}
