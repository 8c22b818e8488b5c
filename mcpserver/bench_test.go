package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	stdlog "log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// BenchmarkStdioEcho serves an echo tool over in-process pipes, as bub-mcp
// (host, audit log, views, validation) and as a plain mcp-go StdioServer,
// and makes calls with a window of w outstanding requests. It is the
// process-free counterpart of internal/bench's BenchmarkEcho: ns/op and
// allocs/op include the client's small share (writing requests, reading
// lines), the same for both.
func BenchmarkStdioEcho(b *testing.B) {
	for _, kind := range []string{"bub", "plain"} {
		for _, w := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/w=%d", kind, w), func(b *testing.B) {
				serve := serveBub
				if kind == "plain" {
					serve = servePlain
				}
				benchStdio(b, serve, w)
			})
		}
	}
}

type stdioServe func(b *testing.B, ctx context.Context, in io.Reader, out io.Writer)

func serveBub(b *testing.B, ctx context.Context, in io.Reader, out io.Writer) {
	go stdio.Serve(ctx, bubServer(b), in, out, providers.Connection{Profile: "default"}, time.Second)
}

func servePlain(b *testing.B, ctx context.Context, in io.Reader, out io.Writer) {
	std := server.NewStdioServer(plainServer())
	std.SetErrorLogger(stdlog.New(io.Discard, "", 0))
	go std.Listen(ctx, in, out)
}

// benchRequest is a sessionless (2026-07-28) tools/call, as the mcp-go
// client sends it.
func benchRequest(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}` + "\n")
}

func benchStdio(b *testing.B, serve stdioServe, window int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer inW.Close()
	serve(b, ctx, inR, outW)
	r := bufio.NewReaderSize(outR, 64<<10)
	roundTrip := func(n int) {
		errc := make(chan error, 1)
		go func() {
			for i := 0; i < n; i++ {
				if _, err := inW.Write(benchRequest(i)); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		for i := 0; i < n; i++ {
			line, err := r.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 && !bytes.Contains(line, []byte("Echo: hello")) {
				b.Fatalf("unexpected response: %s", line)
			}
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	roundTrip(50) // warm up
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for done := 0; done < b.N; done += window {
		roundTrip(min(window, b.N-done))
	}
}

// BenchmarkHTTPEcho is BenchmarkStdioEcho over streamable HTTP: bub-mcp's
// handler (auth and host checks, views, audit) and a plain mcp-go
// StreamableHTTPServer on loopback test servers, called by the mcp-go
// client (sessionless 2026-07-28 protocol) from c goroutines.
func BenchmarkHTTPEcho(b *testing.B) {
	for _, kind := range []string{"bub", "plain"} {
		for _, c := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/c=%d", kind, c), func(b *testing.B) {
				var h http.Handler
				if kind == "bub" {
					h = bubHandler(b)
				} else {
					h = server.NewStreamableHTTPServer(plainServer())
				}
				benchHTTP(b, h, c)
			})
		}
	}
}

// benchHTTP serves h at /mcp on a loopback test server and makes b.N
// echo calls with the mcp-go client (sessionless 2026-07-28 protocol)
// from c goroutines.
func benchHTTP(b *testing.B, h http.Handler, c int) {
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	cl, err := client.NewStreamableHttpClient(ts.URL + "/mcp")
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := cl.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		b.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": "hello"}
	call := func() {
		res, err := cl.CallTool(ctx, req)
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
	}
	for range 200 {
		call()
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	var wg sync.WaitGroup
	per := b.N / c
	for i := range c {
		n := per
		if i == 0 {
			n += b.N % c
		}
		wg.Go(func() {
			for range n {
				call()
			}
		})
	}
	wg.Wait()
}

// reportCPU starts measuring the process's CPU time (user + system, all
// threads: server and client) and returns the function that reports it
// per op as cpu-ns/op. On a shared machine it varies far less than wall
// time, which waits for other processes' turns.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func plainServer() *server.MCPServer {
	s := server.NewMCPServer("plain", "dev")
	s.AddTool(mcp.NewTool("echo", mcp.WithString("message", mcp.Required())),
		mcp.NewTypedToolHandler(func(ctx context.Context, req mcp.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("Echo: " + in.Message), nil
		}))
	return s
}

func bubServer(b *testing.B) *mcpserver.Server {
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("echo", "Echo a message back.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Message string `json:"message" jsonschema:"description=Text to echo back"`
	}) (string, error) {
		return "Echo: " + in.Message, nil
	}))
	return newServer(b, newHost(b, reg, ""))
}

func bubHandler(b *testing.B) http.Handler {
	h, closeSessions := httpHandler(bubServer(b), streamhttp.Options{Profiles: []string{"default"}, CheckHosts: true})
	b.Cleanup(func() { closeSessions(context.Background()) })
	return h
}
