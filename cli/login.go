package cli

import (
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/spf13/cobra"
)

// loginCommand is `bub-mcp login <upstream>`: the local user signs in to
// an auth = "oauth" upstream with a loopback redirect (as mcp-remote
// does); the token set is stored for the local principal (the one of
// stdio clients and `bub-mcp call`), and the server's tools are listed
// with it and remembered.
func loginCommand(env *Env) *cobra.Command {
	var c common
	cmd := &cobra.Command{
		Use:   "login <upstream>",
		Short: "sign in to an upstream MCP server with auth = \"oauth\" as the local user (opens a loopback redirect)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			m, done, err := upstreamsOnDemand(ctx, env, &c, `no upstream servers: add [upstreams.<name>] with auth = "oauth" to bub.toml`) // no other upstream starts
			if err != nil {
				return err
			}
			defer done()
			name := args[0]
			err = m.Login(ctx, name, func(authURL string) {
				fmt.Fprintf(env.Stderr, "Open this URL in a browser to sign in to %s:\n\n  %s\n\nWaiting for the browser to come back...\n", name, authURL)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "signed in to %s as principal %q\n", name, upstream.LocalPrincipal)
			return nil
		},
	}
	c.flags(cmd.Flags())
	return cmd
}

// upstreamsLogoutCommand is `bub-mcp upstreams logout <name>`: it revokes
// (at the upstream's authorization server, when it can) and deletes stored
// token sets of an auth = "oauth" upstream, so the next call of that
// principal asks it to sign in again.
func upstreamsLogoutCommand(env *Env, c *common) *cobra.Command {
	var (
		principal string
		all       bool
	)
	cmd := &cobra.Command{
		Use:   "logout <name> [--principal P | --all]",
		Short: "revoke and delete the stored upstream tokens of a principal (default: the local user), or of all with --all",
		Long: `Revoke and delete the token sets bub-mcp keeps for an upstream with auth = "oauth".

Without --principal, the local user's set is deleted (the one of stdio
clients, bub-mcp call and bub-mcp login). --principal names another
principal (a token's name, or an OAuth principal's issuer#sub, as the audit
log shows it); --all deletes every principal's. A serving bub-mcp sees the
deletion at that principal's next call, which asks to sign in again.

Before deleting a set, bub-mcp revokes its tokens at the upstream's
authorization server (RFC 7009) when its metadata names a
revocation_endpoint, so that a copy of the refresh token stops working
too. The set is deleted either way; the output says for whom the
authorization server revoked the grant and for whom the set was deleted
only here (and why): revoke the grant there by hand if its token may have
leaked.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && principal != "" {
				return &usageError{"--principal and --all are exclusive"}
			}
			ctx := cmd.Context()
			m, done, err := upstreamsOnDemand(ctx, env, c, "no upstream servers: add [upstreams.<name>] to bub.toml")
			if err != nil {
				return err
			}
			defer done()
			name := args[0]
			gone, err := m.Logout(ctx, name, principal, all, operator(env))
			if err != nil {
				return err
			}
			switch {
			case len(gone) == 0 && all:
				fmt.Fprintf(env.Stdout, "upstream %s: no stored tokens\n", name)
			case len(gone) == 0:
				who := principal
				if who == "" {
					who = upstream.LocalPrincipal
				}
				fmt.Fprintf(env.Stdout, "upstream %s: no stored token for principal %q\n", name, who)
			default:
				var names, revoked []string
				for _, g := range gone {
					names = append(names, g.Principal)
					if g.Revoked {
						revoked = append(revoked, g.Principal)
					}
				}
				fmt.Fprintf(env.Stdout, "upstream %s: deleted the tokens of %s\n", name, quoteAll(names))
				if len(revoked) > 0 {
					fmt.Fprintf(env.Stdout, "  revoked at the authorization server: %s\n", quoteAll(revoked))
				}
				for _, g := range gone {
					if !g.Revoked {
						fmt.Fprintf(env.Stdout, "  deleted only here, not revoked: %q: %s\n", g.Principal, g.NotRevoked)
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&principal, "principal", "", "the principal whose token set to revoke and delete (default: the local user)")
	cmd.Flags().BoolVar(&all, "all", false, "revoke and delete every principal's token set")
	return cmd
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
