package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/bubbuild/bub-mcp/config"
)

// checkWorkspace refuses a workspace that is not an existing directory,
// naming where it came from: serving tools whose every call then fails is
// worse than not starting. The usual causes get a hint: a client that did
// not expand ${workspaceFolder}, a relative path resolved against an
// unexpected directory.
func checkWorkspace(dir, from string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && st.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("workspace %s (%s) is not a directory", dir, from)
	case errors.Is(err, fs.ErrNotExist):
		msg := fmt.Sprintf("workspace %s (%s) does not exist", dir, from)
		if strings.Contains(dir, "${") || strings.Contains(dir, "$(") {
			msg += "; it holds an unexpanded variable: give the absolute path, or use a client that expands it"
		}
		return errors.New(msg)
	default:
		return fmt.Errorf("workspace %s (%s): %w", dir, from, err)
	}
}

// checkProfileWorkspaces checks the workspaces of the named profiles,
// with the file and line of each.
func checkProfileWorkspaces(cfg *config.Config, names []string) error {
	for _, name := range names {
		p := cfg.Profiles[name]
		if p == nil || p.Workspace == "" {
			continue
		}
		if err := checkWorkspace(p.Workspace, "profile "+name); err != nil {
			return cfg.Fail(err.Error(), "profiles", name, "workspace")
		}
	}
	return nil
}
