package app_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/providers"
)

// slowGates hold sessions' Environments in the "app-test-slow" factory:
// for a session with a gate, it closes entered, then waits for release.
var (
	slowGates sync.Map // session key → *slowGate
	slowRuns  atomic.Int64
)

type slowGate struct{ entered, release chan struct{} }

func init() {
	environment.Register("app-test-slow", func(ctx context.Context, o environment.Options) (environment.Environment, error) {
		if g, ok := slowGates.Load(o.Session); ok {
			close(g.(*slowGate).entered)
			<-g.(*slowGate).release
		}
		return environment.NewLocal(&environment.LocalOptions{Workspace: o.Workspace})
	})
}

// TestEnvironmentNotBlockedByAnotherSession: while one session's
// Environment is being made (a slow factory: the sandbox's first asks
// Python where it lives, ~100 ms through a pyenv shim), another session's
// calls get theirs: they used to wait on the App-wide lock the factory
// ran under.
func TestEnvironmentNotBlockedByAnotherSession(t *testing.T) {
	a, _ := newApp(t, "[profiles.default]\nenvironment = \"app-test-slow\"\n")
	gate := &slowGate{entered: make(chan struct{}), release: make(chan struct{})}
	slowKey := "slow-" + t.Name() + "-" + strconv.FormatInt(slowRuns.Add(1), 10) // -count=N runs again
	slowGates.Store(slowKey, gate)
	release := sync.OnceFunc(func() { close(gate.release) })
	t.Cleanup(release) // before the App closes, should the test fail
	ctx := t.Context()
	conn := func(key string) *providers.Connection {
		c := &providers.Connection{Transport: "stdio", SessionKey: key}
		if err := a.Resolve(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	fast, slow := conn("fast"), conn(slowKey)
	first, err := a.Environment(ctx, fast)
	if err != nil {
		t.Fatal(err)
	}
	made := make(chan error, 1)
	go func() {
		_, err := a.Environment(ctx, slow)
		made <- err
	}()
	<-gate.entered
	got := make(chan environment.Environment, 1)
	go func() {
		env, _ := a.Environment(ctx, fast)
		got <- env
	}()
	select {
	case env := <-got:
		if env != first {
			t.Errorf("second Environment of one session = %p, want the first, %p", env, first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a session's Environment waited for another session's to be made")
	}
	release()
	if err := <-made; err != nil {
		t.Fatalf("slow session: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Spawn(ctx, environment.Spec{Command: "true"}); err == nil {
		t.Error("Close left an Environment open")
	}
	if _, err := a.Environment(ctx, fast); err == nil {
		t.Error("Environment after Close succeeded")
	}
}
