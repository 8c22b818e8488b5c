// Command plainmcp is the baseline for bub-mcp's benchmarks: a plain
// mark3labs/mcp-go server with the same `echo` tool as the conformance
// fixture (message → "Echo: <message>"), served the way mcp-go's own
// examples do, with mcp-go's defaults. It speaks stdio by default, or
// streamable HTTP at /mcp on the -http address; like `bub-mcp serve`, it
// logs `url=http://HOST:PORT/mcp` on stderr once it listens, so an address
// with port 0 works.
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
	"runtime/pprof"
	"syscall"

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
	if err := run(ctx, log, *addr); err != nil {
		log.Error("plainmcp", "error", err)
		pprof.StopCPUProfile()
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, addr string) error {
	s := newServer()
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
