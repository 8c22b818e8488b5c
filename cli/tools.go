package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/spf13/cobra"
)

// toolsCommand is `bub-mcp tools`.
func toolsCommand(env *Env) *cobra.Command {
	var (
		c      common
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "tools [flags]",
		Short: "list the registered tools, or what one profile's view reaches (--profile)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTools(cmd.Context(), env, &c, asJSON)
		},
	}
	c.flags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: names, flags, input and output schemas")
	return cmd
}

// toolInfo is the JSON form of `bub-mcp tools --json`.
type toolInfo struct {
	Name         string               `json:"name"`
	ModelName    string               `json:"model_name"`
	Description  string               `json:"description"`
	Preserve     bool                 `json:"preserve"`
	AgentUse     bool                 `json:"agent_use"`
	Annotations  registry.Annotations `json:"annotations"`
	InputSchema  json.RawMessage      `json:"input_schema"`
	OutputSchema json.RawMessage      `json:"output_schema,omitempty"`
}

func runTools(ctx context.Context, env *Env, c *common, asJSON bool) error {
	a, err := newApp(ctx, quieted(env, slog.LevelWarn), c)
	if err != nil {
		return err
	}
	defer closeApp(env, a)
	tools := a.Registry().Tools()
	if c.chosen {
		// The profile's view: what its clients (and call --profile) reach.
		conn := providers.Connection{Transport: "cli", Profile: c.profile, SessionKey: c.session}
		if err := a.Resolve(ctx, &conn); err != nil {
			return err
		}
		v, err := a.View(ctx, &conn)
		if err != nil {
			return err
		}
		tools = profileReach(v)
	}
	if asJSON {
		out := make([]toolInfo, len(tools))
		for i, t := range tools {
			out[i] = toolInfo{t.Name, t.ModelName(), t.Description, t.Preserve, t.AgentUse(), t.Annotations, t.InputSchema, t.OutputSchema}
		}
		return writeJSON(env.Stdout, out)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODEL NAME\tPRESERVE\tAGENT USE\tDESCRIPTION")
	for _, t := range tools {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\n", t.Name, t.ModelName(), t.Preserve, t.AgentUse(), firstLine(t.Description))
	}
	return tw.Flush()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
