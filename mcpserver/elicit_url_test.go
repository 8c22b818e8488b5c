package mcpserver_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// urlElicitor records the elicitation it gets and accepts it.
type urlElicitor struct{ got chan mcp.ElicitationParams }

func (e urlElicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.got <- req.Params
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// A tool's URL-mode elicitation (ElicitRequest.URL) reaches a client that
// declared elicitation.url as mode "url" with the URL and an id; a client
// that declared only form elicitation is not asked (CanElicitURL is false).
func TestURLElicitation(t *testing.T) {
	for _, tt := range []struct {
		name string
		caps *mcp.ElicitationCapability
		want string
	}{
		{"url declared", &mcp.ElicitationCapability{URL: &struct{}{}}, "asked: accept"},
		{"form only", &mcp.ElicitationCapability{}, "cannot ask"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := registry.New()
			reg.MustRegister(registry.MustNewTool("test.signin", "Send the user to sign in.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
				if !tc.CanElicitURL(ctx) {
					return "cannot ask", nil
				}
				res, err := tc.Elicit(ctx, registry.ElicitRequest{Message: "Sign in", URL: "https://example.test/login?x=1"})
				if err != nil {
					return "", err
				}
				return "asked: " + res.Action, nil
			}))
			srv := newServer(t, newHost(t, reg, ""))
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			served := make(chan error, 1)
			go func() {
				served <- stdio.Serve(ctx, srv, inR, outW, providers.Connection{Profile: "default"}, time.Second)
			}()
			e := urlElicitor{got: make(chan mcp.ElicitationParams, 1)}
			c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(nil)), client.WithProtocolVersion(legacy), client.WithElicitationHandler(e))
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			init := mcp.InitializeRequest{}
			init.Params.Capabilities.Elicitation = tt.caps
			if _, err := c.Initialize(ctx, init); err != nil {
				t.Fatal(err)
			}
			req := mcp.CallToolRequest{}
			req.Params.Name = "test_signin"
			res, err := c.CallTool(ctx, req)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			if got := res.Content[0].(mcp.TextContent).Text; got != tt.want {
				t.Errorf("result %q; want %q", got, tt.want)
			}
			select {
			case p := <-e.got:
				if tt.caps.URL == nil {
					t.Errorf("a form-only client got %+v", p)
				}
				if p.Mode != mcp.ElicitationModeURL || p.URL != "https://example.test/login?x=1" || p.ElicitationID == "" || p.RequestedSchema != nil {
					t.Errorf("elicitation %+v; want mode url, the URL, an id and no schema", p)
				}
			default:
				if tt.caps.URL != nil {
					t.Error("the client got no elicitation")
				}
			}
			inW.Close()
			<-served
		})
	}
}
