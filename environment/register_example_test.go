package environment_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// shoutingEnv is a custom Environment: the local one, except that every
// file reads in upper case. A real one would run processes in a container
// or on another machine; the tools on top stay the same.
type shoutingEnv struct{ *environment.LocalEnvironment }

func (e shoutingEnv) ReadText(ctx context.Context, path string) (string, error) {
	s, err := e.LocalEnvironment.ReadText(ctx, path)
	return strings.ToUpper(s), err
}

// A plugin registers its environment in init(), as a database/sql driver
// does; a binary enables it with a blank import.
func init() {
	environment.Register("shouting", func(ctx context.Context, o environment.Options) (environment.Environment, error) {
		local, err := environment.NewLocal(&environment.LocalOptions{Workspace: o.Workspace, Confine: o.Confine, AllowPaths: o.AllowPaths, Hidden: o.Hidden, Python: o.Python})
		if err != nil {
			return nil, err
		}
		return shoutingEnv{local}, nil
	})
}

// ExampleRegister picks a custom Environment for a profile and serves a
// call through it, on the path every MCP call takes (app.App.Call).
func ExampleRegister() {
	out, err := readNote("environment = \"shouting\"\n")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(out)
	// Output:
	// SHIP IT
}

// readNote writes notes.txt ("ship it") to a new workspace, makes an App
// whose default profile works there, with the bub.toml lines env after
// its workspace key, and reads the note with a tool, through the
// profile's Environment, as an MCP client's call would.
func readNote(env string) (string, error) {
	dir, err := os.MkdirTemp("", "bub-example-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ship it\n"), 0o644); err != nil {
		return "", err
	}
	cfg, err := config.Parse("bub.toml", fmt.Sprintf("[profiles.default]\nworkspace = %q\n%s", dir, env), nil)
	if err != nil {
		return "", err
	}
	type readArgs struct {
		Path string `json:"path"`
	}
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("notes.read", "Read a note.", func(ctx context.Context, tc *registry.ToolContext, in readArgs) (string, error) {
		return tc.Env.ReadText(ctx, in.Path)
	}))
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: reg, Modules: []string{}, Home: filepath.Join(dir, ".bub"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", err
	}
	defer a.Close()
	ctx := context.Background()
	conn := &providers.Connection{Transport: "stdio"}
	if err := a.Resolve(ctx, conn); err != nil {
		return "", err
	}
	res := a.Call(ctx, conn, app.Request{Tool: "notes_read", Args: []byte(`{"path":"notes.txt"}`)})
	return res.Output(), nil
}
