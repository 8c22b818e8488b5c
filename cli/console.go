package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/asfront"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/console"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
)

// consoleCommand is `bub-mcp console`.
func consoleCommand(env *Env) *cobra.Command {
	var (
		c    common
		addr string
	)
	cmd := &cobra.Command{
		Use:   "console [--http ADDR] [--config FILE]",
		Short: "serve the operator console (live calls, approvals, charts, sessions, tools, upstreams) over $BUB_HOME",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsole(cmd.Context(), env, &c, addr)
		},
	}
	c.flags(cmd.Flags())
	cmd.Flags().StringVar(&addr, "http", "", "listen on ADDR (default [console] listen, else "+console.DefaultListen+"); beyond loopback it needs console tokens")
	return cmd
}

// runConsole serves the console until ctx ends. It prints the URL on
// stdout and opens nothing.
func runConsole(ctx context.Context, env *Env, c *common, addr string) error {
	a, err := newApp(ctx, quieted(env, slog.LevelWarn), c)
	if err != nil {
		return err
	}
	defer closeApp(env, a)
	from := "--http"
	if addr == "" {
		if m, ok := console.FromApp(a); ok {
			addr, from = m.Listen, "[console] listen"
		}
	}
	if addr == "" {
		addr = console.DefaultListen
	}
	if err := checkListen(addr, from); err != nil {
		return err
	}
	loopback := streamhttp.IsLoopback(addr)
	oauth, err := consoleOAuth(a.Config(), nil)
	if err != nil {
		return err
	}
	con, err := console.New(console.Options{App: a, Loopback: loopback, AllowedHosts: a.Config().Server.AllowedHosts, Logger: env.Logger, Version: VersionString(), Standalone: true, OAuth: oauth})
	if err != nil {
		return err
	}
	defer con.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: con.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	// The pages' own address, the same as on a serve that mounts them.
	url := "http://" + ln.Addr().String() + console.Prefix + "/"
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

// consoleOAuth is the resource server the console accepts OAuth
// principals with: [auth.oauth] with only the rules that grant the
// console (console = true); nil when no rule does. Tokens are for this
// server as for /mcp (their audience is public_url or its /mcp).
func consoleOAuth(cfg *config.Config, front *asfront.Front) (*auth.ResourceServer, error) {
	return oauthServer(cfg, front, func(r config.OAuthRule) bool { return r.Console })
}
