package codemode

import (
	"errors"
	"log/slog"
	"reflect"
	"sync"

	"github.com/bubbuild/bub-mcp/codemode/runner"
	"github.com/bubbuild/bub-mcp/environment"
)

// runnerSet keeps one runner per Environment, each with a fork server
// (where the Environment can host one, environment.ForkServerHost) or
// else interpreters started ahead through env.Spawn, so that a session's
// later runs pay no start-up and env.Close reaches the interpreter. A runner is dropped
// when its Environment closes (environment.ClosedNotifier; otherwise when
// a run finds it closed) and all of them at close, so none outlives the
// App. The zero value is ready to use.
type runnerSet struct {
	mu       sync.Mutex
	runners  map[environment.Environment]*runner.Runner
	done     chan struct{} // closed by close: ends the watchers
	closed   bool
	watchers sync.WaitGroup
	log      *slog.Logger // for the runners' fork servers; nil means slog.Default
}

// get returns env's runner, making it on first use, and the function to
// call once the run is over.
func (s *runnerSet) get(env environment.Environment, python string, pool int, memory int64) (*runner.Runner, func(), error) {
	if !reflect.ValueOf(env).Comparable() {
		// Such an Environment cannot key the map: it gets a runner per
		// run, with nothing started ahead and nothing kept.
		r := runner.New(&runner.Options{Python: python, Start: runner.EnvStart(env), Memory: memory})
		return r, func() { r.Close() }, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, environment.ErrClosed
	}
	if r, ok := s.runners[env]; ok {
		return r, func() {}, nil
	}
	if s.runners == nil {
		s.runners = map[environment.Environment]*runner.Runner{}
		s.done = make(chan struct{})
	}
	r := runner.New(&runner.Options{Python: python, Start: runner.EnvStart(env), Prestart: true, Pool: pool, Memory: memory,
		Fork: runner.EnvForkStart(env), Log: s.log})
	s.runners[env] = r
	if n, ok := env.(environment.ClosedNotifier); ok {
		s.watchers.Add(1)
		go func(closed, done <-chan struct{}) {
			defer s.watchers.Done()
			select {
			case <-closed:
				s.drop(env, r)
			case <-done:
			}
		}(n.Closed(), s.done)
	}
	return r, func() {}, nil
}

// failed drops env's runner after a run that found env closed, for
// Environments that do not announce their end.
func (s *runnerSet) failed(env environment.Environment, r *runner.Runner, err error) {
	if errors.Is(err, environment.ErrClosed) && reflect.ValueOf(env).Comparable() {
		s.drop(env, r)
	}
}

// drop forgets and closes r, env's runner.
func (s *runnerSet) drop(env environment.Environment, r *runner.Runner) {
	s.mu.Lock()
	if s.runners[env] == r {
		delete(s.runners, env)
	}
	s.mu.Unlock()
	r.Close()
}

// close closes every runner and waits for the watchers; later gets fail
// with environment.ErrClosed.
func (s *runnerSet) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	runners := s.runners
	s.runners = nil
	if s.done != nil {
		close(s.done)
	}
	s.mu.Unlock()
	var errs []error
	for _, r := range runners {
		errs = append(errs, r.Close())
	}
	s.watchers.Wait()
	return errors.Join(errs...)
}
