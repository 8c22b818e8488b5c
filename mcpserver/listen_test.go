package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
)

// TestListenAcknowledgedFirst opens sessionless subscriptions/listen
// streams for notifications the server does not offer: each must carry
// notifications/subscriptions/acknowledged before its result. mcp-go
// v1.2.1 can drop the acknowledgement when the result follows at once (its
// forwarder takes the notification off the queue while the response is
// written; the race of mark3labs/mcp-go PR #969); the server waits for it
// (see the AfterSubscriptionsListen hook in New).
func TestListenAcknowledgedFirst(t *testing.T) {
	srv := newServer(t, newHost(t, registry.New(), ""))
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	defer func() { closeSessions(context.Background()); ts.Close() }()
	body := `{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for i := range 300 {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var methods []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal([]byte(line), &m) == nil {
				methods = append(methods, m.Method)
			}
		}
		resp.Body.Close()
		if len(methods) != 2 || methods[0] != "notifications/subscriptions/acknowledged" || methods[1] != "" {
			t.Fatalf("stream %d carried %q; want the acknowledgement, then the result", i, methods)
		}
	}
}
