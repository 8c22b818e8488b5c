package cli

import (
	"fmt"
	"log/slog"
	"text/tabwriter"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/spf13/cobra"
)

func init() {
	// Upstream servers see the same version as our clients do.
	upstream.Version = Version
}

// upstreamsCommand is `bub-mcp upstreams`.
func upstreamsCommand(env *Env) *cobra.Command {
	var (
		c      common
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "upstreams [flags]",
		Short: "start the upstream MCP servers and show each one's state, tool count and last error",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, err := newApp(ctx, quieted(env, slog.LevelError), &c)
			if err != nil {
				return err
			}
			defer closeApp(env, a)
			m, ok := upstream.FromApp(a)
			var st []upstream.Status
			if ok {
				st = m.Status()
			}
			if asJSON {
				if st == nil {
					st = []upstream.Status{}
				}
				return writeJSON(env.Stdout, st)
			}
			if len(st) == 0 {
				fmt.Fprintln(env.Stdout, "no upstream servers: add [upstreams.<name>] to bub.toml or servers to $BUB_HOME/mcp.json")
				return nil
			}
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTRANSPORT\tSTART\tSTATE\tTOOLS\tRESTARTS\tORIGIN\tLAST ERROR")
			for _, s := range st {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", s.Name, s.Transport, s.Start, s.State, s.Tools, s.Restarts, s.Origin, s.LastError)
			}
			return tw.Flush()
		},
	}
	c.flags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// upstreamHealth gives /healthz the upstream servers' states.
func upstreamHealth(a *app.App) func() []string {
	m, ok := upstream.FromApp(a)
	if !ok {
		return nil
	}
	return m.Healthz
}
