package environment_test

import (
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/environment/envtest"
	"github.com/bubbuild/bub-mcp/internal/testenv"
)

func TestContractLocal(t *testing.T) {
	t.Parallel()
	envtest.Run(t, func(t *testing.T, ws string) environment.Environment {
		e, err := environment.NewLocal(&environment.LocalOptions{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return e
	})
}

func TestContractSandbox(t *testing.T) {
	t.Parallel()
	testenv.MustHaveBwrap(t)
	envtest.Run(t, func(t *testing.T, ws string) environment.Environment {
		e, err := environment.NewSandbox(&environment.SandboxOptions{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return e
	})
}
