// Command plainmcp is the baseline for bub-mcp's benchmarks: a plain
// mark3labs/mcp-go server with the same `echo` tool as the conformance
// fixture (message → "Echo: <message>"), served the way mcp-go's own
// examples do, with mcp-go's defaults. It speaks stdio by default, or
// streamable HTTP at /mcp on the -http address; like `bub-mcp serve`, it
// logs `url=http://HOST:PORT/mcp` on stderr once it listens, so an address
// with port 0 works.
//
// With -proxy, the arguments after the flags are an upstream stdio MCP
// server's command line, and plainmcp serves that server's tools under
// their own names, each call forwarded with mcp-go's client: the floor for
// bub-mcp's upstream benchmark, a proxy with nothing but mcp-go as
// shipped on both sides.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// echoArgs is the echo tool's input.
type echoArgs struct {
	Message string `json:"message"`
}

func newServer() *server.MCPServer {
	s := server.NewMCPServer("plainmcp", "dev")
	tool := mcp.NewTool("echo",
		mcp.WithDescription("Echo a message back (for benchmarks)."),
		mcp.WithString("message", mcp.Required(), mcp.Description("Text to echo back")),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
	)
	s.AddTool(tool, mcp.NewTypedToolHandler(func(ctx context.Context, req mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("Echo: " + in.Message), nil
	}))
	return s
}

func main() {
	addr := flag.String("http", "", "serve streamable HTTP at /mcp on ADDR (e.g. 127.0.0.1:0) instead of stdio")
	proxy := flag.Bool("proxy", false, "serve the tools of the stdio MCP server whose command line follows the flags")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The same diagnostic as bub-mcp's, so both sides of a benchmark can
	// be profiled alike.
	if path := os.Getenv("BUB_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	if path := os.Getenv("BUB_MEMPROFILE"); path != "" {
		runtime.MemProfileRate = 4 << 10
		defer func() {
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	s := newServer()
	if *proxy {
		var err error
		if s, err = proxyServer(ctx, flag.Args()); err != nil {
			log.Error("plainmcp", "error", err)
			pprof.StopCPUProfile()
			stop()
			os.Exit(1)
		}
	}
	if err := run(ctx, log, s, *addr); err != nil {
		log.Error("plainmcp", "error", err)
		pprof.StopCPUProfile()
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, s *server.MCPServer, addr string) error {
	if addr == "" {
		log.Info("mcp.stdio.start")
		err := server.NewStdioServer(s).Listen(ctx, os.Stdin, os.Stdout)
		if err == nil || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	// What StreamableHTTPServer.Start does, on a listener we open first so
	// that port 0 can be reported.
	streamable := server.NewStreamableHTTPServer(s)
	mux := http.NewServeMux()
	mux.Handle("/mcp", streamable)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: mux}
	log.Info("mcp.http.start", "url", "http://"+ln.Addr().String()+"/mcp")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	streamable.CloseSessions(context.Background())
	return srv.Shutdown(context.Background())
}

// proxyServer starts the upstream, lists its tools and serves each one,
// forwarding calls with the mcp-go client, as mcp-go's examples would.
func proxyServer(ctx context.Context, command []string) (*server.MCPServer, error) {
	if len(command) == 0 {
		return nil, errors.New("-proxy needs the upstream's command line after the flags")
	}
	tr := transport.NewStdio(command[0], os.Environ(), command[1:]...)
	if err := tr.Start(ctx); err != nil {
		return nil, fmt.Errorf("start %s: %w", command[0], err)
	}
	// The protocol bub-mcp speaks to its upstreams.
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("start %s: %w", command[0], err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "plainmcp-proxy", Version: "dev"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("initialize %s: %w", command[0], err)
	}
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("tools/list of %s: %w", command[0], err)
	}
	s := server.NewMCPServer("plainmcp-proxy", "dev")
	for _, t := range list.Tools {
		s.AddTool(t, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return c.CallTool(ctx, req)
		})
	}
	return s, nil
}
