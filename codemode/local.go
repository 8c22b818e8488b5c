package codemode

import (
	"context"
	"io"
	"math"
	"sync"

	"github.com/bubbuild/bub-mcp/codemode/runner"
	"github.com/bubbuild/bub-mcp/environment"
)

// RunnerOptions configure LocalRunner. The zero value is usable.
type RunnerOptions struct {
	// MaxOutput is how many bytes of printed output a run keeps (the end
	// of it); zero means runner.DefaultMaxOutput.
	MaxOutput int
	// NoPrestart starts a fresh interpreter for every run instead of
	// keeping one started ahead.
	NoPrestart bool
}

// LocalRunner returns the environment.CodeRunnerFactory that runs code in
// any environment able to spawn Python (LocalEnvironment among them), with
// the subprocess runner of package runner: the interpreter is
// environment.PythonOf(env), started through env.Spawn, so it works in the
// workspace and env.Close reaches it. Each environment gets its own
// runner, created on the first run; from then on it keeps one interpreter
// started ahead, so later runs pay no start-up. Closing the environment
// closes the runner.
//
// Errors are runner's: *runner.CodeError, *runner.TimeoutError,
// *runner.CanceledError and *runner.CrashError, which run_code turns into
// Bub's messages.
func LocalRunner(opts *RunnerOptions) environment.CodeRunnerFactory {
	var o RunnerOptions
	if opts != nil {
		o = *opts
	}
	return func(env environment.Environment) (environment.CodeRunner, io.Closer, error) {
		l := &localRunner{opts: o, env: env}
		return l.run, l, nil
	}
}

type localRunner struct {
	opts RunnerOptions
	env  environment.Environment

	mu     sync.Mutex
	r      *runner.Runner
	closed bool
}

func (l *localRunner) runner() (*runner.Runner, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, environment.ErrClosed
	}
	if l.r == nil {
		l.r = runner.New(&runner.Options{
			Python:   environment.PythonOf(l.env),
			Start:    runner.EnvStart(l.env),
			Prestart: !l.opts.NoPrestart,
		})
	}
	return l.r, nil
}

func (l *localRunner) run(ctx context.Context, _ environment.Environment, req environment.CodeRequest) (string, error) {
	r, err := l.runner()
	if err != nil {
		return "", err
	}
	maxCalls := req.MaxCalls
	if maxCalls <= 0 {
		maxCalls = math.MaxInt
	}
	return r.Run(ctx, runner.Request{
		Code:      req.Code,
		Tools:     req.Tools,
		Call:      req.Call,
		Output:    req.Output,
		MaxCalls:  maxCalls,
		MaxOutput: l.opts.MaxOutput,
	})
}

// Close closes the runner, killing its pre-started interpreter.
func (l *localRunner) Close() error {
	l.mu.Lock()
	r := l.r
	l.closed = true
	l.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.Close()
}
