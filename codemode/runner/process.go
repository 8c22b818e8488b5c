package runner

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"
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

// LocalStart returns a StartFunc that runs processes on this machine in dir
// ("" means the current directory) with env added to the inherited
// environment. Each process leads a new process group: Signal and the end
// of the start context signal the whole group, so children and double-forked
// grandchildren go too unless they leave the group (setsid).
//
// Stdout and Stderr are read ends of plain pipes. Wait must be called to
// release them: they are closed 3 seconds after the process has exited, in
// case descendants outside the group still hold the write ends.
func LocalStart(dir string, env []string) StartFunc {
	env = slices.Clone(env)
	return func(ctx context.Context, argv []string) (Process, error) {
		if len(argv) == 0 {
			return nil, errors.New("runner: empty command")
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = dir
		if len(env) > 0 {
			cmd.Env = append(os.Environ(), env...)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return killGroup(cmd.Process.Pid, syscall.SIGKILL) }

		var files []*os.File // every end, for cleanup on failure
		pipe := func() (r, w *os.File, err error) {
			r, w, err = os.Pipe()
			if err == nil {
				files = append(files, r, w)
			}
			return r, w, err
		}
		stdinR, stdinW, err1 := pipe()
		stdoutR, stdoutW, err2 := pipe()
		stderrR, stderrW, err3 := pipe()
		err := errors.Join(err1, err2, err3)
		if err == nil {
			cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
			err = cmd.Start()
		}
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, err
		}
		// The child has its own copies of these ends.
		stdinR.Close()
		stdoutW.Close()
		stderrW.Close()
		return &localProcess{cmd: cmd, stdin: stdinW, stdout: stdoutR, stderr: stderrR}, nil
	}
}

// readerCloseDelay is how long a localProcess keeps its output pipes open
// after the process has exited.
const readerCloseDelay = 3 * time.Second

type localProcess struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *os.File

	waitOnce sync.Once
	code     int
	err      error
}

func (p *localProcess) WriteStdin(b []byte) error {
	_, err := p.stdin.Write(b)
	return err
}

func (p *localProcess) CloseStdin() error { return p.stdin.Close() }
func (p *localProcess) Stdout() io.Reader { return p.stdout }
func (p *localProcess) Stderr() io.Reader { return p.stderr }

func (p *localProcess) Wait() (int, error) {
	p.waitOnce.Do(func() {
		err := p.cmd.Wait()
		p.code = -1
		if ps := p.cmd.ProcessState; ps != nil {
			p.code = ps.ExitCode()
			if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code = -int(ws.Signal())
			}
		}
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = nil // a non-zero exit is reported through the code
		}
		p.err = err
		p.stdin.Close()
		time.AfterFunc(readerCloseDelay, func() {
			p.stdout.Close()
			p.stderr.Close()
		})
	})
	return p.code, p.err
}

func (p *localProcess) Signal(kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return killGroup(p.cmd.Process.Pid, sig)
}

// killGroup signals the process group led by pid; a group that is already
// gone is not an error.
func killGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

var _ Process = (*localProcess)(nil)
