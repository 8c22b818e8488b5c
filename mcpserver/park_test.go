package mcpserver_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

type echoSampler struct{}

func (echoSampler) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	in := req.Messages[0].Content.(mcp.TextContent).Text
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled " + in)}, Model: "m"}, nil
}

// TestSamplingTakesOverTheParkedStream samples twice on one 2025 session
// whose GET stream is parked: the first call hands the stream to mcp-go,
// the second finds it handed over.
func TestSamplingTakesOverTheParkedStream(t *testing.T) {
	reg := registry.New()
	reg.MustRegister(sampleTool())
	h := newHost(t, reg, "[profiles.default]\n")
	handler, closeSessions := httpHandler(newServer(t, h), streamhttp.Options{Profiles: h.Config().ProfileNames()})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })

	//lint:ignore SA1019 the 2025 protocol's GET stream is what this test is about
	tr, err := transport.NewStreamableHTTP(ts.URL+"/mcp", transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(legacy), client.WithSamplingHandler(echoSampler{}))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = legacy
	init.Params.ClientInfo = mcp.Implementation{Name: "bub-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	for _, prompt := range []string{"one", "two"} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		req := mcp.CallToolRequest{}
		req.Params.Name = "test_sample"
		req.Params.Arguments = map[string]any{"prompt": prompt}
		res, err := c.CallTool(ctx, req)
		cancel()
		if err != nil || text(res) != "sampled "+prompt {
			t.Fatalf("test_sample(%q) = %+v, %v; want %q", prompt, res, err, "sampled "+prompt)
		}
	}
}
