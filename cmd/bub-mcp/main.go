// Command bub-mcp serves Bub's tool system to MCP clients (stdio and
// streamable HTTP) and runs an agent loop against the same tools.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/bubbuild/bub-mcp/cli"
	// The standard modules: builtin tools, code mode, upstreams, the
	// sandbox, the PostgreSQL store and the rest (see the package).
	_ "github.com/bubbuild/bub-mcp/modules/standard"
	// The schemas of the builtin tools, so that start-up does not reflect
	// them (see the package).
	_ "github.com/bubbuild/bub-mcp/internal/schemaseed"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
