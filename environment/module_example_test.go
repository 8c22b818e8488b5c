package environment_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// taggedModule is a configurable Environment: the module
// environment.tagged, whose own key tag comes from the table that picks
// it. Neither config nor environment knows the key.
type taggedModule struct {
	Tag string `toml:"tag"`
}

func (*taggedModule) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "environment.tagged", New: func() app.Module { return new(taggedModule) }}
}

// Validate checks the module's keys once they are decoded.
func (m *taggedModule) Validate() error {
	if m.Tag == "" {
		return fmt.Errorf("environment.tagged needs a tag")
	}
	return nil
}

// NewEnvironment makes one session's Environment.
func (m *taggedModule) NewEnvironment(ctx context.Context, o environment.Options) (environment.Environment, error) {
	local, err := environment.NewLocal(&environment.LocalOptions{Workspace: o.Workspace, Confine: o.Confine, AllowPaths: o.AllowPaths, Python: o.Python})
	if err != nil {
		return nil, err
	}
	return taggedEnv{local, m.Tag}, nil
}

type taggedEnv struct {
	*environment.LocalEnvironment
	tag string
}

func (e taggedEnv) ReadText(ctx context.Context, path string) (string, error) {
	s, err := e.LocalEnvironment.ReadText(ctx, path)
	return e.tag + s, err
}

func init() { app.RegisterModule(new(taggedModule)) }

// ExampleModule picks a configurable Environment for a profile with the
// nested table [profiles.<name>.environment]: kind chooses the module
// environment.<kind>, the other keys are the module's own.
func ExampleModule() {
	dir, err := os.MkdirTemp("", "bub-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ship it\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	src := fmt.Sprintf("[profiles.default]\nworkspace = %q\n[profiles.default.environment]\nkind = \"tagged\"\ntag = \"[draft] \"\n", dir)
	cfg, err := config.Parse("bub.toml", src, nil)
	if err != nil {
		log.Fatal(err)
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
		log.Fatal(err)
	}
	defer a.Close()

	ctx := context.Background()
	conn := &providers.Connection{Transport: "stdio"}
	if err := a.Resolve(ctx, conn); err != nil {
		log.Fatal(err)
	}
	res := a.Call(ctx, conn, app.Request{Tool: "notes_read", Args: []byte(`{"path":"notes.txt"}`)})
	fmt.Print(res.Output())
	// Output:
	// [draft] ship it
}
