package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/mcpserver"
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
				if err := waitUpstreams(ctx, env, m); err != nil {
					return err
				}
				st = m.Status()
			}
			if asJSON {
				if st == nil {
					st = []upstream.Status{}
				}
				if err := writeJSON(env.Stdout, st); err != nil {
					return err
				}
				return upstreamsFailed(env, st)
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
			if err := tw.Flush(); err != nil {
				return err
			}
			return upstreamsFailed(env, st)
		},
	}
	c.flags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// waitUpstreams waits for every starting upstream's first attempt,
// saying on stderr which ones it waits for and how each one ended.
func waitUpstreams(ctx context.Context, env *Env, m *upstream.Module) error {
	var starting []string
	for _, s := range m.Status() {
		if s.State == upstream.StateStarting {
			starting = append(starting, s.Name)
		}
	}
	if len(starting) == 0 {
		return nil
	}
	began := time.Now()
	fmt.Fprintf(env.Stderr, "starting %d upstream server(s): %s\n", len(starting), strings.Join(starting, ", "))
	return m.Wait(ctx, func(s upstream.Status) {
		line := fmt.Sprintf("  %s: %s", s.Name, s.State)
		if s.State == upstream.StateReady {
			line += fmt.Sprintf(", %d tools", s.Tools)
		}
		fmt.Fprintf(env.Stderr, "%s (%.1fs)\n", line, time.Since(began).Seconds())
	})
}

// upstreamsFailed makes the command fail when an upstream is not up,
// naming each one and its error on stderr.
func upstreamsFailed(env *Env, st []upstream.Status) error {
	failed := 0
	for _, s := range st {
		if s.State == upstream.StateBackoff || s.State == upstream.StateError {
			failed++
			fmt.Fprintf(env.Stderr, "upstream %s failed: %s\n", s.Name, s.LastError)
		}
	}
	if failed > 0 {
		return &ExitError{Code: 1}
	}
	return nil
}

// upstreamHealth gives /healthz the upstream servers' states: degraded
// while one is failing (between retries, retrying after a failure, or
// connected with its tools refused).
func upstreamHealth(a *app.App) func() mcpserver.Health {
	m, ok := upstream.FromApp(a)
	if !ok {
		return nil
	}
	return func() mcpserver.Health {
		h := mcpserver.Health{Details: m.Healthz()}
		for _, s := range m.Status() {
			switch {
			case s.State == upstream.StateBackoff, s.State == upstream.StateError,
				s.State == upstream.StateStarting && s.LastError != "":
				h.Degraded = true
			}
		}
		return h
	}
}
