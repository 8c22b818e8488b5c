package environment_test

import (
	"context"
	"fmt"
	"log"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/environment"
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
	local, err := environment.NewLocal(&environment.LocalOptions{Workspace: o.Workspace, Confine: o.Confine, AllowPaths: o.AllowPaths, Hidden: o.Hidden, Python: o.Python})
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
	out, err := readNote("[profiles.default.environment]\nkind = \"tagged\"\ntag = \"[draft] \"\n")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(out)
	// Output:
	// [draft] ship it
}
