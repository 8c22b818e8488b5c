package environment_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/bubbuild/bub-mcp/environment"
)

// ExampleNewLocal writes a file through a confined environment, runs a
// shell command on it and shows what happens to a path that escapes.
func ExampleNewLocal() {
	dir, err := os.MkdirTemp("", "bub-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	env, err := environment.NewLocal(&environment.LocalOptions{Workspace: dir, Confine: true})
	if err != nil {
		log.Fatal(err)
	}
	defer env.Close() // ends anything still running

	ctx := context.Background()
	if err := env.WriteText(ctx, "notes/todo.txt", "write tests\nship it\n"); err != nil {
		log.Fatal(err)
	}

	p, err := env.Spawn(ctx, environment.Spec{Command: "wc -l < notes/todo.txt; grep ship notes/todo.txt"})
	if err != nil {
		log.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	code, err := p.Wait()
	fmt.Printf("exit %d, err %v\n%s", code, err, out)

	_, err = env.ReadText(ctx, "../elsewhere.txt")
	fmt.Println(err != nil, errors.Is(err, environment.ErrOutsideWorkspace))
	// Output:
	// exit 0, err <nil>
	// 2
	// ship it
	// true true
}
