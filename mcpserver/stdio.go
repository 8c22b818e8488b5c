package mcpserver

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/server"
)

// ServeStdio serves one client on in/out until in closes or ctx ends. On
// ctx's end, in-flight calls get grace to finish before they are
// cancelled. Nothing but protocol is written to out.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, conn providers.Connection, grace time.Duration) error {
	conn.Transport = "stdio"
	calls, cancelCalls := context.WithCancel(context.Background())
	defer cancelCalls()
	std := server.NewStdioServer(s.mcp)
	server.WithWorkerPoolSize(s.workers)(std)
	std.SetContextFunc(func(ctx context.Context) context.Context { return withConnection(ctx, conn) })
	std.SetErrorLogger(log.New(slogWriter{s.log}, "", 0))
	errc := make(chan error, 1)
	go func() { errc <- std.Listen(calls, in, out) }()
	select {
	case err := <-errc:
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if !s.waitCalls(graceCtx) {
		s.log.Warn("mcp.stdio.shutdown.cancelling", "reason", "grace period over")
	}
	cancelCalls()
	select {
	case <-errc:
	case <-time.After(shutdownTimeout):
	}
	return nil
}

// slogWriter adapts mcp-go's *log.Logger output to slog (stderr).
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn("mcp.stdio", "msg", string(p))
	return len(p), nil
}
