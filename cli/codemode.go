package cli

import (
	"context"
	"errors"

	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/host"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
)

// Code mode: the View split (codemode.Provider), a pre-started Python per
// session environment (codemode.LocalRunner), and the stub as the MCP
// resource bub://codemode/stub. The run_code tool and the code_mode
// command register themselves in package codemode.
func init() {
	hostSetups = append(hostSetups, setupCodeMode)
	hostExtensions = append(hostExtensions, stubResource)
}

func setupCodeMode(ctx context.Context, env *Env, o *host.Options) error {
	o.CodeMode = codemode.Provider(&codemode.Options{Home: o.Home, Python: o.Config.CodeMode.Python, Logger: env.Logger})
	o.CodeRunner = codemode.LocalRunner(nil)
	return nil
}

// errNoCodeMode answers a stub read from a connection without code mode.
var errNoCodeMode = errors.New("code mode is not active for this session: enable it with `bub-mcp call code_mode enable=true`, or code_mode = true in the profile")

func stubResource(h *host.Host) mcpserver.Extension {
	return mcpserver.TextResource(codemode.StubURI, "code-mode tool stub",
		"The Python stub declaring the tools callable inside run_code as `await tools.<name>(...)` (code mode only).",
		"text/x-python",
		func(ctx context.Context, conn *providers.Connection) (string, error) {
			if err := h.Resolve(ctx, conn); err != nil {
				return "", err
			}
			v, err := h.View(ctx, conn)
			if err != nil {
				return "", err
			}
			content, _, ok, err := codemode.ViewStub(h.Store().Home(), conn, v)
			if err != nil {
				return "", err
			}
			if !ok {
				return "", errNoCodeMode
			}
			return content, nil
		})
}
