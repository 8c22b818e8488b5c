// Command bub-mcp-conformance is bub-mcp with the conformance fixtures
// compiled in: the same CLI (serve, serve --http, tools, call), one more
// blank import.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/bubbuild/bub-mcp/cli"
	_ "github.com/bubbuild/bub-mcp/internal/conformance"
	_ "github.com/bubbuild/bub-mcp/modules/standard"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
