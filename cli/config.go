package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bubbuild/bub-mcp/upstream"
)

// configCommand is `bub-mcp config`, whose one subcommand checks the
// configuration without serving.
func configCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "check the configuration (config check)",
		Args:  unknownCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			return &usageError{"name a subcommand: check"}
		},
	}
	var c common
	check := &cobra.Command{
		Use:   "check [flags]",
		Short: "validate bub.toml and $BUB_HOME/mcp.json as serve would load them; exit 0 if valid, 1 with the error if not",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return checkConfig(cmd.Context(), env, &c)
		},
	}
	c.flags(check.Flags())
	cmd.AddCommand(check)
	return cmd
}

// checkConfig loads the configuration and builds the App as serve does
// (every module decodes its table, mcp.json is read, profiles are
// checked), then says what it checked.
func checkConfig(ctx context.Context, env *Env, c *common) error {
	cfg, _, err := loadConfig(env, c.config)
	if err != nil {
		return err
	}
	if err := checkProfileWorkspaces(cfg, cfg.ProfileNames()); err != nil {
		return err
	}
	c.onDemand = true // a check reads mcp.json; it starts no server
	a, err := newApp(ctx, env, c)
	if err != nil {
		return err
	}
	defer closeApp(env, a)
	printChecked(env, a.Config().Path, filepath.Join(a.Home(), upstream.MCPJSONName), len(a.Config().ProfileNames()))
	return nil
}

// printChecked reports a successful check on stdout: which files were
// read, so a check of the wrong file is noticed.
func printChecked(env *Env, tomlPath, mcpJSON string, profiles int) {
	if tomlPath == "" {
		tomlPath = "(none: the zero configuration)"
	}
	if !fileExists(mcpJSON) {
		mcpJSON += " (absent)"
	}
	fmt.Fprintf(env.Stdout, "bub.toml: %s\nmcp.json: %s\nprofiles: %d\nok\n", tomlPath, mcpJSON, profiles)
}
