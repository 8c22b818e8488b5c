package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/sessions"
)

func init() {
	var dir string
	var asJSON bool
	register(&Command{
		Name:  "audit",
		Usage: "verify [--dir DIR] [--json]",
		Short: "check the audit log's hash chain (exit 1 at the first broken record)",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&dir, "dir", "", "audit directory (default $BUB_HOME/audit)")
			fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
		},
		Run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) == 0 || args[0] != "verify" {
				return &usageError{msg: "name a subcommand: verify"}
			}
			// Flags may follow the subcommand: parse what is after it.
			if err := fs.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
				return nil
			} else if err != nil {
				return &ExitError{Code: 2}
			}
			if fs.NArg() > 0 {
				return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
			}
			return auditVerify(env, dir, asJSON)
		},
	})
}

// auditVerify verifies dir (default $BUB_HOME/audit) and prints the
// report: exit status 0 when the chain is intact, 1 with the first broken
// record's file:line and what is wrong.
func auditVerify(env *Env, dir string, asJSON bool) error {
	if dir == "" {
		home := env.Getenv("BUB_HOME")
		if home == "" {
			h, err := sessions.DefaultHome()
			if err != nil {
				return err
			}
			home = h
		}
		dir = filepath.Join(home, "audit")
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
