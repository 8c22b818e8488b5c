package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

// TestStdioInputEnd covers what a client that closes its input gets: the
// calls it sent still answer within the grace period (a script piping
// its requests in reads them), a call past the grace period is cut, and
// a signal after the input's end cuts at once. A tool asking the client
// something after the input's end fails at once: no answer can come.
func TestStdioInputEnd(t *testing.T) {
	const (
		released = "released"
		cut      = "cut"
		failed   = "failed"
	)
	tests := []struct {
		name  string
		tool  string
		grace time.Duration
		after func(release chan struct{}, cancel context.CancelFunc) // after the input's end
		// seen waits until the server has met the input's end: an ask
		// call, sent too, fails then.
		seen   bool
		answer string
	}{
		{name: "released within grace", tool: "test_block", grace: time.Minute, after: func(r chan struct{}, _ context.CancelFunc) { close(r) }, answer: released},
		{name: "grace over", tool: "test_block", grace: 100 * time.Millisecond, after: func(chan struct{}, context.CancelFunc) {}, answer: cut},
		{name: "signal", tool: "test_block", grace: time.Minute, seen: true, after: func(_ chan struct{}, cancel context.CancelFunc) { cancel() }, answer: cut},
		{name: "asks the client", tool: "test_ask", grace: time.Minute, after: func(chan struct{}, context.CancelFunc) {}, answer: failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := boundsServer(t, mcpserver.Limits{}, release)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := servePiped(ctx, srv, tt.grace)
			inW, served := p.in, p.served
			out := bufio.NewReader(p.out)
			lines := make(chan string, 16)
			go func() {
				defer close(lines)
				for {
					l, err := out.ReadString('\n')
					if err != nil {
						return
					}
					lines <- l
				}
			}()
			send := func(l string) {
				if _, err := io.WriteString(inW, l+"\n"); err != nil {
					t.Fatal(err)
				}
			}
			send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
			<-lines
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			send(callLine("1", tt.tool, `{}`))
			if tt.tool == "test_ask" {
				if l := <-lines; !strings.Contains(l, "elicitation/create") {
					t.Fatalf("server sent %q; want its elicitation request", l)
				}
			} else {
				<-started
			}
			if tt.seen {
				send(callLine("2", "test_ask", `{}`))
				if l := <-lines; !strings.Contains(l, "elicitation/create") {
					t.Fatalf("server sent %q; want its elicitation request", l)
				}
			}
			inW.Close()
			if tt.seen {
				if l := <-lines; answerOf(t, l) != failed {
					t.Fatalf("ask call after the input's end = %q; want it failed", l)
				}
			}
			tt.after(release, cancel)
			select {
			case l := <-lines:
				if diff := cmp.Diff(tt.answer, answerOf(t, l)); diff != "" {
					t.Errorf("answer (-want +got):\n%s", diff)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no answer after the input's end")
			}
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve = %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return after the input's end")
			}
		})
	}
}

// answerOf names what a tools/call answer says: cut (server shutting
// down), failed (the client closed its input), released, or the line.
func answerOf(t *testing.T, l string) string {
	t.Helper()
	var m struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct{ Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		t.Fatalf("answer %q: %v", l, err)
	}
	text := ""
	if len(m.Result.Content) > 0 {
		text = m.Result.Content[0].Text
	}
	switch {
	case m.Error != nil && strings.Contains(m.Error.Message, "shutting down"), m.Result.IsError && strings.Contains(text, "shutting down"):
		return "cut"
	case m.Result.IsError && strings.Contains(text, "closed its input"):
		return "failed"
	case text == "released":
		return "released"
	}
	return l
}

// askTool asks the client a question and reports the error it gets.
func askTool() *registry.Tool {
	return registry.MustNewTool("test.ask", "Ask the client.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		_, err := tc.Elicit(ctx, registry.ElicitRequest{Message: "Name?"})
		return "", err
	})
}
