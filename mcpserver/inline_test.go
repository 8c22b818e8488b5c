package mcpserver_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/google/go-cmp/cmp"
)

// TestStdioReadsWhileCallsRun: a request the client sends while another
// runs is read and answered, whether the running one came alone (and so
// runs on the reading goroutine) or carries an id mcp-go cannot hold; a
// running call can be cancelled, and then gets no answer.
func TestStdioReadsWhileCallsRun(t *testing.T) {
	cases := []struct {
		name, id string
		cancel   bool // end the call with notifications/cancelled, else release it
	}{
		{"integer id, cancelled", "7", true},
		{"string id, released", `"seven"`, false},
		{"big integer id, released", "12345678901234567890125", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			p := startStdio(t, boundsServer(t, mcpserver.Limits{}, release))
			p.send(initLine)
			if m := p.recv(); m["result"] == nil {
				t.Fatalf("initialize = %v", m)
			}
			p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

			p.send(callLine(tc.id, "test_block", `{}`))
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatalf("test_block did not start; the server said %v", p.recv())
			}
			p.send(`{"jsonrpc":"2.0","id":"ping-1","method":"ping"}`)
			if diff := cmp.Diff(map[string]any{"id": "ping-1", "result": map[string]any{}}, p.recv()); diff != "" {
				t.Fatalf("ping while a call runs (-want +got):\n%s", diff)
			}
			if tc.cancel {
				p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + tc.id + `}}`)
				p.send(`{"jsonrpc":"2.0","id":"ping-2","method":"ping"}`)
				// The tool's context ends with the cancellation, and the
				// handler then drops its answer: it comes neither before
				// ping-2's nor after.
				if diff := cmp.Diff(map[string]any{"id": "ping-2", "result": map[string]any{}}, p.recv()); diff != "" {
					t.Fatalf("after the cancellation (-want +got):\n%s", diff)
				}
				p.in.Close()
				for {
					line, err := p.out.ReadString('\n')
					if err != nil {
						break
					}
					t.Errorf("after the cancellation the server sent %s", line)
				}
				return
			}
			close(release)
			m := p.recv()
			var want any = json.Number(tc.id)
			if tc.id[0] == '"' {
				want = tc.id[1 : len(tc.id)-1]
			}
			if m["id"] != want || m["result"] == nil {
				t.Errorf("released call's answer = %v; want a result with id %s", m, tc.id)
			}
		})
	}
}
