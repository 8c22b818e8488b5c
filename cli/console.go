package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/bubbuild/bub-mcp/console"
	"github.com/bubbuild/bub-mcp/mcpserver"
)

func init() {
	var (
		c    common
		addr string
	)
	register(&Command{
		Name:  "console",
		Usage: "[--http ADDR] [--config FILE]",
		Short: "serve the operator console (live calls, approvals, charts, sessions, tools, upstreams) over $BUB_HOME",
		Flags: func(fs *flag.FlagSet) {
			c.flags(fs)
			fs.StringVar(&addr, "http", "", "listen on ADDR (default [console] listen, else "+console.DefaultListen+"); beyond loopback it needs console tokens")
		},
		Run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return &usageError{"unexpected arguments"}
			}
			return runConsole(ctx, env, &c, addr)
		},
	})
}

// runConsole serves the console until ctx ends. It prints the URL on
// stdout and opens nothing.
func runConsole(ctx context.Context, env *Env, c *common, addr string) error {
	a, err := newApp(ctx, quieted(env, slog.LevelWarn), c)
	if err != nil {
		return err
	}
	defer closeApp(env, a)
	if addr == "" {
		if m, ok := console.FromApp(a); ok {
			addr = m.Listen
		}
	}
	if addr == "" {
		addr = console.DefaultListen
	}
	loopback := mcpserver.IsLoopback(addr)
	con, err := console.New(console.Options{App: a, Loopback: loopback, AllowedHosts: a.Config().Server.AllowedHosts, Logger: env.Logger, Version: VersionString()})
	if err != nil {
		return err
	}
	defer con.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: con.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintln(env.Stdout, url)
	env.Logger.Info("console.start", "url", url, "home", a.Home())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Event streams never end by themselves: give pages a moment, then
	// close what is left.
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	srv.Close()
	return nil
}
