package mcpserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// exampleServer is an MCP server over an App with one tool, echo; close
// ends the App and removes its directories.
func exampleServer() (srv *mcpserver.Server, close func()) {
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("echo", "Echo the text.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}))
	dir, err := os.MkdirTemp("", "bub-example")
	if err != nil {
		panic(err)
	}
	cfg, err := config.Parse("bub.toml", "", func(string) string { return "" })
	if err != nil {
		panic(err)
	}
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: reg, Modules: []string{}, Home: dir, Workspace: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	srv, err = mcpserver.New(&mcpserver.Options{Backend: a, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	return srv, func() { a.Close(); os.RemoveAll(dir) }
}

// A server on the stdio transport (mcpserver/stdio): one JSON-RPC message
// per line each way, here over io.Pipe. The 2026-07-28 protocol needs no
// initialize: each request declares its version in _meta.
func ExampleNew_stdio() {
	srv, done := exampleServer()
	defer done()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go stdio.Serve(ctx, srv, inR, outW, providers.Connection{Profile: "default"}, time.Second)

	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"example","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`)
	answer, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.Contains(answer, `"id":1`), strings.Contains(answer, `"text":"hello"`))
	inW.Close()
	// Output: true true
}

// A server on the streamable HTTP transport (mcpserver/streamhttp), here
// over httptest: /mcp (both protocol eras), /healthz and, when
// configured, /metrics.
func ExampleNew_http() {
	srv, done := exampleServer()
	defer done()
	h := streamhttp.New(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.CloseSessions(context.Background())

	body := `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"example","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.Contains(string(b), `"id":"a"`), strings.Contains(string(b), `"text":"hi"`))
	// Output: 200 true true
}
