package codemode

import (
	"context"
	"io"
	"sync"

	"github.com/bubbuild/bub-mcp/environment"
)

// TrackedLocalRunner is LocalRunner plus a function that waits until every
// environment's runner made so far has an interpreter pre-started, so that
// benchmarks time warm runs, as between model turns.
func TrackedLocalRunner(opts *RunnerOptions) (environment.CodeRunnerFactory, func(ctx context.Context) error) {
	var (
		mu  sync.Mutex
		all []*localRunner
	)
	f := LocalRunner(opts)
	factory := func(env environment.Environment) (environment.CodeRunner, io.Closer, error) {
		run, closer, err := f(env)
		if l, ok := closer.(*localRunner); ok {
			mu.Lock()
			all = append(all, l)
			mu.Unlock()
		}
		return run, closer, err
	}
	wait := func(ctx context.Context) error {
		mu.Lock()
		ls := append([]*localRunner(nil), all...)
		mu.Unlock()
		for _, l := range ls {
			r, err := l.runner()
			if err != nil {
				return err
			}
			if err := r.WaitReady(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	return factory, wait
}
