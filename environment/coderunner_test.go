package environment

import (
	"context"
	"errors"
	"io"
	"testing"
)

type closeCounter struct{ n int }

func (c *closeCounter) Close() error { c.n++; return nil }

// TestNewCodeRunner checks the per-environment runner hook: it is made
// once with the environment itself, serves RunCode, and is closed by
// Close, once.
func TestNewCodeRunner(t *testing.T) {
	var made []Environment
	closer := &closeCounter{}
	factory := func(env Environment) (CodeRunner, io.Closer, error) {
		made = append(made, env)
		return func(ctx context.Context, _ Environment, req CodeRequest) (string, error) {
			return "own " + req.Code, nil
		}, closer, nil
	}
	fallback := func(context.Context, Environment, CodeRequest) (string, error) { return "fallback", nil }
	e := newTestEnv(t, &LocalOptions{NewCodeRunner: factory, CodeRunner: fallback})
	if len(made) != 1 || made[0] != Environment(e) {
		t.Fatalf("factory called with %v; want the environment, once", made)
	}
	if out, err := e.RunCode(t.Context(), CodeRequest{Code: "x"}); out != "own x" || err != nil {
		t.Errorf("RunCode = %q, %v; want %q, nil", out, err, "own x")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if closer.n != 1 {
		t.Errorf("runner closed %d times; want 1", closer.n)
	}
	if _, err := e.RunCode(t.Context(), CodeRequest{Code: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("RunCode after Close = %v; want ErrClosed", err)
	}

	boom := errors.New("boom")
	_, err := NewLocal(&LocalOptions{Workspace: t.TempDir(), NewCodeRunner: func(Environment) (CodeRunner, io.Closer, error) {
		return nil, nil, boom
	}})
	if !errors.Is(err, boom) {
		t.Errorf("NewLocal with a failing NewCodeRunner = %v; want it to wrap %v", err, boom)
	}
}
