package runner

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/bubbuild/bub-mcp/environment"
)

// A Process is a started interpreter as the runner sees it. Environments
// implement it over whatever spawns their processes (os/exec, a container, a
// remote shell); only stdin and stdout pipes are needed for the protocol.
//
// The runner reads Stdout and Stderr until EOF while it calls Wait and
// Signal from other goroutines, so Wait must not invalidate the readers
// before they reach EOF, and every method must be safe for concurrent use.
type Process interface {
	// WriteStdin writes p to the process's stdin in full.
	WriteStdin(p []byte) error
	// CloseStdin closes stdin.
	CloseStdin() error
	// Stdout returns the process's stdout.
	Stdout() io.Reader
	// Stderr returns the process's stderr.
	Stderr() io.Reader
	// Wait waits for the process to exit and returns its exit code, or
	// -N when signal N ended it. Calling it again returns the same result.
	Wait() (int, error)
	// Signal sends SIGTERM, or SIGKILL if kill is set, to the process and
	// everything it started (its whole process group or tree). Signalling
	// a process that has exited is not an error.
	Signal(kill bool) error
}

// A StartFunc starts argv (argv[0] is looked up in PATH) and returns the
// running process. Like exec.CommandContext, it should kill the process
// when ctx is done; the runner passes a context that lasts as long as it
// uses the process (context.Background for a pre-started one).
type StartFunc func(ctx context.Context, argv []string) (Process, error)

// EnvStart returns a StartFunc over env.Spawn (argv form, stdin kept
// open): the interpreter runs in env's workspace, in its own process
// group, and env.Close reaches it. This is how package codemode runs code
// in a session's environment.
func EnvStart(env environment.Environment) StartFunc {
	return func(ctx context.Context, argv []string) (Process, error) {
		p, err := env.Spawn(ctx, environment.Spec{Argv: argv, KeepStdin: true})
		if err != nil {
			return nil, err
		}
		return envProcess{p}, nil
	}
}

// envProcess adapts an environment.Process to Process, whose Wait reports
// a death by signal N as exit code -N, like Python's returncode.
type envProcess struct{ environment.Process }

func (p envProcess) Wait() (int, error) {
	code, err := p.Process.Wait()
	var se *environment.SignalError
	if errors.As(err, &se) {
		return -int(se.Signal), nil
	}
	return code, err
}

// LocalStart returns a StartFunc that runs processes on this machine in dir
// ("" means the current directory) with env added to the inherited
// environment: EnvStart over an environment.LocalEnvironment made on the
// first start. Each process leads a new process group: Signal and the end
// of the start context signal the whole group, so children and
// double-forked grandchildren go too unless they leave the group (setsid).
func LocalStart(dir string, env []string) StartFunc {
	opts := &environment.LocalOptions{Workspace: dir, ExtraEnv: slices.Clone(env)}
	var (
		once  sync.Once
		start StartFunc
		err   error
	)
	return func(ctx context.Context, argv []string) (Process, error) {
		once.Do(func() {
			var le *environment.LocalEnvironment
			if le, err = environment.NewLocal(opts); err == nil {
				start = EnvStart(le)
			}
		})
		if err != nil {
			return nil, err
		}
		return start(ctx, argv)
	}
}

var _ Process = envProcess{}
