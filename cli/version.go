package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set by `make build` with -ldflags "-X": the release (git describe),
// the commit and the build date. Left empty, they come from the module's
// build information (a `go install ...@v1.2.3` knows its version, a build
// in a git checkout its commit).
var (
	Version = ""
	Commit  = ""
	Date    = ""
)

// VersionString is the version reported to MCP clients and by `bub-mcp
// version`: the stamped one, else the module version, else "dev".
func VersionString() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// buildDetails returns the commit and date the binary was built from,
// stamped or read from the VCS settings Go records.
func buildDetails() (commit, date string, modified bool) {
	commit, date = Commit, Date
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.time":
				if date == "" {
					date = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true" && Commit == ""
			}
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	return commit, date, modified
}

// versionLine is "bub-mcp <version>", with the commit and date when known.
func versionLine() string {
	line := "bub-mcp " + VersionString()
	commit, date, modified := buildDetails()
	var extra string
	if commit != "" {
		extra = "commit " + commit
		if modified {
			extra += "+dirty"
		}
	}
	if date != "" {
		if extra != "" {
			extra += ", "
		}
		extra += "built " + date
	}
	if extra != "" {
		line += " (" + extra + ")"
	}
	return line
}

// versionCommand is `bub-mcp version` (also --version).
func versionCommand(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version (also --version)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(env.Stdout, versionLine())
			return err
		},
	}
}
