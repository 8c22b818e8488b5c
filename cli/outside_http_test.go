package cli_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPOSTWithoutSession: a 2025-era POST other than initialize that names
// no session gets 400 saying what is missing, as the 2025-11-25 transport
// asks; 404 stays the answer for a session that does not exist (the
// client's cue to initialize again), and initialize and sessionless
// 2026-07-28 requests need none.
func TestPOSTWithoutSession(t *testing.T) {
	_, url, _ := startHTTP(t, "1s")
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	tests := []struct {
		name    string
		header  map[string]string
		body    string
		code    int
		contain string
	}{
		{"request, no headers", nil, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.StatusBadRequest, "Mcp-Session-Id is missing"},
		{"request, 2025 version", map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs_read","arguments":{"path":"x"}}}`, http.StatusBadRequest, "Mcp-Session-Id is missing"},
		{"notification", map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusBadRequest, "Mcp-Session-Id is missing"},
		{"unknown session", map[string]string{"Mcp-Session-Id": "mcp-session-AAAAAAAAAAAAAAAAAAAAAAAAAA", "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.StatusNotFound, ""},
		{"unsupported version", map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.StatusBadRequest, "Unsupported protocol version"},
		{"initialize", nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, http.StatusOK, `"protocolVersion":"2025-11-25"`},
		{"sessionless 2026", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta + `}}`, http.StatusOK, `"fs_read"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if resp.StatusCode != tt.code || !strings.Contains(string(b), tt.contain) {
				t.Errorf("%d %q; want %d with %q", resp.StatusCode, b, tt.code, tt.contain)
			}
		})
	}
}
