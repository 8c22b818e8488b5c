package mcpserver_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

type acceptingElicitor struct{}

func (acceptingElicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"answer": "yes to " + req.Params.Message}}}, nil
}

// TestStdioServerRequests runs sampling and elicitation from tools over the
// stdio transport: the server's requests go out on stdout and the client's
// answers are routed back to the calls waiting for them, concurrently.
func TestStdioServerRequests(t *testing.T) {
	reg := registry.New()
	reg.MustRegister(sampleTool())
	reg.MustRegister(registry.MustNewTool("test.ask", "Ask the user.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Question string `json:"question"`
	}) (string, error) {
		res, err := tc.Elicit(ctx, registry.ElicitRequest{Message: in.Question})
		if err != nil {
			return "", err
		}
		return res.Action + ": " + res.Content["answer"].(string), nil
	}))
	srv := newServer(t, newHost(t, reg, ""))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := servePiped(ctx, srv, time.Second)
	inW, served := p.in, p.served

	c := client.NewClient(transport.NewIO(p.out, inW, io.NopCloser(nil)),
		client.WithProtocolVersion(legacy), client.WithSamplingHandler(echoSampler{}), client.WithElicitationHandler(acceptingElicitor{}))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	type out struct {
		name, text string
		err        error
	}
	calls := []struct{ name, arg, value, want string }{
		{"test_sample", "prompt", "hello", "sampled hello"},
		{"test_ask", "question", "ok?", "accept: yes to ok?"},
		{"test_sample", "prompt", "again", "sampled again"},
	}
	results := make(chan out, len(calls))
	for _, cl := range calls {
		go func() {
			req := mcp.CallToolRequest{}
			req.Params.Name = cl.name
			req.Params.Arguments = map[string]any{cl.arg: cl.value}
			res, err := c.CallTool(ctx, req)
			if err == nil && res.IsError {
				err = io.ErrUnexpectedEOF
			}
			var text string
			if err == nil {
				text = res.Content[0].(mcp.TextContent).Text
			}
			results <- out{cl.want, text, err}
		}()
	}
	for range calls {
		r := <-results
		if r.err != nil {
			t.Fatalf("call: %v", r.err)
		}
		if diff := cmp.Diff(r.name, r.text); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
	}
	inW.Close() // the client goes away: the server returns
	if err := <-served; err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
}
