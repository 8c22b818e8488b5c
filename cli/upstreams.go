package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
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
		Long: "Start the upstream MCP servers and show each one's state, tool count and last error.\n\n" +
			"It waits for each server's first attempt (at most its start_timeout), saying on stderr\n" +
			"which it waits for and how each one ends, and exits 1 naming every server that\n" +
			"failed to start, with its error.",
		Args: noArgs,
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
				fmt.Fprintln(env.Stdout, noUpstreams)
				return nil
			}
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTRANSPORT\tSTART\tSTATE\tTOOLS\tQUARANTINED\tPIN\tRESTARTS\tORIGIN\tLAST ERROR")
			held := 0
			for _, s := range st {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\t%s\n", s.Name, s.Transport, s.Start, s.State, s.Tools,
					s.Quarantined, s.Pin, s.Restarts, s.Origin, s.LastError)
				held += s.Quarantined
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if held > 0 {
				fmt.Fprintln(env.Stderr, "quarantined tools wait for a human: bub-mcp upstreams diff <name>, then bub-mcp upstreams approve <name> [tool...]")
			}
			return upstreamsFailed(env, st)
		},
	}
	c.flags(cmd.PersistentFlags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(upstreamsDiffCommand(env, &c), upstreamsApproveCommand(env, &c), upstreamsLogoutCommand(env, &c))
	return cmd
}

// upstreamsDiffCommand is `bub-mcp upstreams diff <name>`: it starts that
// one server, so its current tool list is checked against its pins, and
// shows each tool awaiting approval as a unified diff of the canonical
// JSON of its pinned and current definitions (a new tool whole).
func upstreamsDiffCommand(env *Env, c *common) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "diff <name> [--json]",
		Short: "show the tool definitions of an upstream server that wait for approval, as diffs against the pinned ones",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			m, done, err := upstreamsOnDemand(ctx, env, c, noUpstreams) // starts only the server asked about
			if err != nil {
				return err
			}
			defer done()
			name := args[0]
			if m.WaitFor(ctx, name+".") {
				for _, s := range m.Status() {
					if s.Name == name && s.LastError != "" {
						fmt.Fprintf(env.Stderr, "upstream %s could not list its tools now (%s): showing what was seen last\n", name, s.LastError)
					}
				}
			}
			changes, gone, err := m.PinDiff(name)
			if err != nil {
				return err
			}
			if asJSON {
				if changes == nil {
					changes = []upstream.ToolChange{}
				}
				return writeJSON(env.Stdout, map[string]any{"upstream": name, "pending": changes, "no_longer_listed": gone})
			}
			if len(changes) == 0 {
				fmt.Fprintf(env.Stdout, "upstream %s: no tool waits for approval\n", name)
				return nil
			}
			for _, ch := range changes {
				fmt.Fprintf(env.Stdout, "# %s/%s: %s\n%s\n", name, ch.Tool, ch.Reason, ch.Diff)
			}
			if len(gone) > 0 {
				fmt.Fprintf(env.Stdout, "# pinned tools %s no longer lists (a new tool may be one of them renamed): %s\n", name, strings.Join(gone, ", "))
			}
			fmt.Fprintf(env.Stdout, "# accept with: bub-mcp upstreams approve %s [tool...]\n", name)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// upstreamsApproveCommand is `bub-mcp upstreams approve <name> [tool...]`:
// it pins the definitions `upstreams diff` showed (all of the server's,
// or the named tools'), each an audit record with the approving user; a
// running bub-mcp lists them within a second, without a restart.
func upstreamsApproveCommand(env *Env, c *common) *cobra.Command {
	return &cobra.Command{
		Use:   "approve <name> [tool...]",
		Short: "approve the quarantined tool definitions of an upstream server (all of them, or the named tools)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, done, err := upstreamsOnDemand(cmd.Context(), env, c, noUpstreams) // approves what diff showed: starts nothing
			if err != nil {
				return err
			}
			defer done()
			approved, err := m.Approve(args[0], args[1:], operator(env))
			if err != nil {
				return err
			}
			for _, t := range approved {
				fmt.Fprintf(env.Stdout, "approved %s/%s\n", args[0], t)
			}
			return nil
		},
	}
}

// waitUpstreams waits for every starting upstream's first attempt,
// saying on stderr which ones it waits for and how each one ended.
func waitUpstreams(ctx context.Context, env *Env, m *upstream.Module) error {
	// Every started server is reported below, so every one is named: a
	// server that failed at once (a missing command) is in backoff
	// before this looks, and is still one of those waited for.
	var started []string
	starting := false
	for _, s := range m.Status() {
		if s.State != upstream.StateIdle && s.State != upstream.StateClosed {
			started = append(started, s.Name)
		}
		starting = starting || s.State == upstream.StateStarting
	}
	if !starting {
		return nil
	}
	began := time.Now()
	fmt.Fprintf(env.Stderr, "starting %d upstream server(s): %s\n", len(started), strings.Join(started, ", "))
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
func upstreamHealth(a *app.App) func() streamhttp.Health {
	m, ok := upstream.FromApp(a)
	if !ok {
		return nil
	}
	return func() streamhttp.Health {
		h := streamhttp.Health{Details: m.Healthz()}
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

// upstreamsOnDemand is the upstream module of an App for a command that
// works on one server (diff, approve, login, logout): no server starts
// until it is used; done closes the App. none is the usage message when
// no server is configured.
func upstreamsOnDemand(ctx context.Context, env *Env, c *common, none string) (m *upstream.Module, done func(), err error) {
	c.onDemand = true
	a, err := newApp(ctx, quieted(env, slog.LevelError), c)
	if err != nil {
		return nil, nil, err
	}
	m, ok := upstream.FromApp(a)
	if !ok {
		closeApp(env, a)
		return nil, nil, &usageError{none}
	}
	return m, func() { closeApp(env, a) }, nil
}

// noUpstreams is the usage message of a command that needs one.
const noUpstreams = "no upstream servers: add [upstreams.<name>] to bub.toml or servers to $BUB_HOME/mcp.json"

// operator names who runs a command that changes shared state (approvals,
// logouts), for the audit record: $USER, else "local user".
func operator(env *Env) string {
	if by := env.Getenv("USER"); by != "" {
		return by
	}
	return "local user"
}
