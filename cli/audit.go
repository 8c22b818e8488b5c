package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bubbuild/bub-mcp/audit"
)

// auditCommand is `bub-mcp audit`, whose one subcommand checks the audit
// log's hash chain.
func auditCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "check the audit log's hash chain (audit verify)",
		Args:  unknownCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			return &usageError{"name a subcommand: verify"}
		},
	}
	var (
		dir    string
		asJSON bool
	)
	verify := &cobra.Command{
		Use:   "verify [--dir DIR] [--json]",
		Short: "check the audit log's hash chain: exit 0 when intact, 1 at the first missing, altered or reordered record",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return auditVerify(env, dir, asJSON)
		},
	}
	// On the parent, so they may stand before or after "verify".
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "audit directory (default $BUB_HOME/audit)")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.AddCommand(verify)
	return cmd
}

// auditVerify verifies dir (default $BUB_HOME/audit) and prints the
// report: exit status 0 when the chain is intact, 1 with the first broken
// record's file:line and what is wrong.
func auditVerify(env *Env, dir string, asJSON bool) error {
	if dir == "" {
		home, err := bubHome(env)
		if err != nil {
			return err
		}
		dir = filepath.Join(home, "audit")
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		// Exit 1 still: a log that was never written and one that was
		// removed look alike here, and the second must not pass.
		return fmt.Errorf("no audit log at %s: none written yet (bub-mcp writes it with the first tool call), or it was removed", dir)
	}
	rep, err := audit.Verify(dir)
	if err != nil {
		return err
	}
	if asJSON {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s\n", b)
	} else {
		files := "files"
		if len(rep.Files) == 1 {
			files = "file"
		}
		fmt.Fprintf(env.Stdout, "%s: %d records in %d %s", dir, rep.Records, len(rep.Files), files)
		if rep.Records > 0 {
			fmt.Fprintf(env.Stdout, " (seq %d to %d)", rep.First, rep.Last)
		}
		if rep.Unchained > 0 {
			fmt.Fprintf(env.Stdout, ", %d written before the chain (not checked)", rep.Unchained)
		}
		fmt.Fprintln(env.Stdout)
	}
	if rep.Problem != nil {
		fmt.Fprintf(env.Stderr, "bub-mcp audit verify: %s\n", dir+string(filepath.Separator)+rep.Problem.Error())
		return &ExitError{Code: 1}
	}
	if !asJSON {
		fmt.Fprintln(env.Stdout, "intact")
	}
	return nil
}
