package spill

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// newSession is a real session in a temporary $BUB_HOME.
func newSession(t *testing.T) *sessions.Session {
	t.Helper()
	store, err := sessions.Open(t.TempDir(), &sessions.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("sessions.Open: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	sess, err := store.Session(t.TempDir(), "test")
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	return sess
}

type bigArgs struct {
	N    int    `json:"n,omitempty"`
	Text string `json:"text,omitempty"`
	Fail bool   `json:"fail,omitempty"`
}

// newExec is an executor with a tool "big" (n x's, or text, as a result or
// an error), spill.read and the spill hook at threshold.
func newExec(t *testing.T, threshold int) *registry.Executor {
	t.Helper()
	big := registry.MustNewTool("big", "Print a lot.", func(ctx context.Context, tc *registry.ToolContext, in bigArgs) (string, error) {
		out := in.Text
		if out == "" {
			out = strings.Repeat("x", in.N)
		}
		if in.Fail {
			return "", errors.New(out)
		}
		return out, nil
	})
	reg := registry.New()
	reg.MustRegister(big)
	reg.MustRegister(ReadTool())
	return registry.NewExecutor(reg, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler),
		Hooks: []registry.Hooks{Hook(threshold, slog.New(slog.DiscardHandler))}})
}
