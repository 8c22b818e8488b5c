// Package environment is where tools touch the outside world: it spawns
// processes and reads and writes text files on behalf of a
// session, so that tools stay independent of where that world is.
//
// It is the Go counterpart of Bub's Environment protocol. The contract is
// the [Environment] and [Process] interfaces; [LocalEnvironment] implements
// them on the host and [SandboxEnvironment] in bubblewrap sandboxes
// ("sandbox", configured by the module environment.sandbox in package
// sandbox); package envtest checks both against the contract. Other
// implementations (a container, a remote machine) plug in as modules
// (environment.<kind>, see [Module]), with configuration keys of their
// own, or by name with [Register] when they have none: the database/sql
// driver pattern and the analogue of Bub's provide_environment hook. A
// profile picks one with [profiles.<name>.environment] kind = "<kind>"
// (or `environment = "<kind>"`). Extra abilities are optional interfaces
// found by type assertion, like [PythonInterpreter].
//
// Code mode needs nothing beyond Spawn: it starts its interpreter as a
// process of the environment, so every Environment runs run_code. An
// Environment that runs code its own way (the seed protocol's run_code)
// implements [CodeRunner], and code mode hands it the runs instead.
//
// Every process runs in its own process group, so signals and Close reach
// the whole tree a shell builds, not just the shell.
package environment

import (
	"context"
	"errors"
	"io"
	"syscall"
)

// Environment is the world a session's tools act on. Tools hold one per
// session and must not assume it is the host: paths, processes and files
// all go through it.
//
// Implementations must be safe for concurrent use.
type Environment interface {
	// Workspace is the absolute directory relative paths are resolved
	// against and processes start in by default.
	Workspace() string

	// ResolvePath turns a tool's path argument into the absolute path the
	// environment will use, so that messages can name the file the tool
	// actually touched. It fails when the path may not be used (for
	// instance outside a confined workspace).
	ResolvePath(p string) (string, error)

	// Spawn starts a process. The ctx bounds the process's life: when it
	// is done, the whole process group is killed. Pass a detached context
	// (context.WithoutCancel) for processes that outlive the call, such
	// as background shells; Close still ends them.
	Spawn(ctx context.Context, spec Spec) (Process, error)

	// ReadText returns a file's content as text and refuses what is not
	// text, so a tool never hands the model binary garbage.
	ReadText(ctx context.Context, path string) (string, error)

	// WriteText replaces a file's content, creating missing parent
	// directories the way Bub's fs.write does.
	WriteText(ctx context.Context, path, content string) error

	// Close ends every process the environment started. It is safe to
	// call more than once; later Spawn calls fail with ErrClosed.
	Close() error
}

// Spec describes a process to spawn. Exactly one of Command and Argv must
// be set: Command for what a model writes (shell syntax), Argv when the
// caller controls the words and wants no shell quoting.
type Spec struct {
	// Command is run by bash -c, or sh -c when bash is not installed.
	Command string
	// Argv is executed directly; Argv[0] is looked up in PATH.
	Argv []string
	// Dir is the working directory; empty means the workspace. Relative
	// directories are resolved like paths given to ResolvePath.
	Dir string
	// Env holds KEY=VALUE entries added to the inherited environment;
	// they win over inherited entries with the same key.
	Env []string
	// KeepStdin leaves stdin open for WriteStdin. Without it stdin is
	// at end-of-file from the start, so a command that reads stdin (cat,
	// a pager, a prompt) finishes instead of hanging a tool call.
	KeepStdin bool
}

// Process is a running (or finished) spawned process. Its methods are safe
// for concurrent use, except that each output stream must have at most one
// reader at a time.
type Process interface {
	// Stdout is the read end of the process's standard output pipe. The
	// caller must read it (or the process may block once the pipe is
	// full). Bytes are passed through unchanged; decoding is the caller's
	// job.
	Stdout() io.Reader
	// Stderr is the read end of the process's standard error pipe, with
	// the same rules as Stdout.
	Stderr() io.Reader
	// WriteStdin writes to the process's stdin. It fails unless the
	// process was spawned with Spec.KeepStdin and stdin is still open.
	WriteStdin(b []byte) error
	// CloseStdin sends end-of-file to the process. Closing twice is not
	// an error.
	CloseStdin() error
	// Wait blocks until the process has exited and returns its exit code.
	// Any number of goroutines may call it and all get the same result.
	// A process killed by a signal reports -1 and a *SignalError.
	Wait() (exitCode int, err error)
	// Signal sends SIGTERM, or SIGKILL when kill is true, to the
	// process's whole group, so children and grandchildren of a shell get
	// it too. Signalling a process that has already gone is not an error.
	Signal(kill bool) error
	// Running reports whether the process has not exited yet.
	Running() bool
	// Pid is the process ID, which is also its process group ID.
	Pid() int
	// Done is closed once the process has exited and its output has
	// ended: both streams were read to end-of-file, or a grace period
	// after exit has passed (see LocalOptions.WaitDelay). After Done no
	// read blocks any more.
	Done() <-chan struct{}
}

// ClosedNotifier is implemented by environments that announce their end:
// Closed returns a channel closed when Close begins. Holders of
// per-environment state (background shells, code runners) use it to let
// go; it is optional so that other environments need not provide it.
type ClosedNotifier interface {
	Closed() <-chan struct{}
}

// FileOpener is implemented by environments that can stream a file, so a
// tool can read part of a file that is too large for ReadText (a page of a
// long log) without loading all of it. It is optional so that other
// environments need not provide it; both of this package's do.
type FileOpener interface {
	// OpenFile opens a regular file for reading, after ReadText's checks
	// on the path: resolution, confinement, directories and other
	// non-regular files (a FIFO would block) are refused with the same
	// errors. Neither size nor content is checked. The caller closes it.
	OpenFile(ctx context.Context, path string) (io.ReadCloser, error)
}

// StdinContextWriter is implemented by processes whose stdin writes can
// be abandoned. A process that does not read its stdin fills the pipe, and
// a plain WriteStdin then blocks until the process reads or exits;
// WriteStdinContext gives up when ctx ends instead, and reports how many
// bytes went in before it did. It is optional so that other
// environments need not provide it; both of this package's do.
type StdinContextWriter interface {
	WriteStdinContext(ctx context.Context, b []byte) (n int, err error)
}

// PythonInterpreter is implemented by environments that know which Python
// runs code in them. It is optional so that environments without Python
// need not pretend.
type PythonInterpreter interface {
	// Python is the interpreter command, such as "python3".
	Python() string
}

// DefaultPython is the interpreter used when an environment does not name
// one, as in Bub.
const DefaultPython = "python3"

// PythonOf returns the interpreter env runs code with, or DefaultPython
// when env does not say, so code runners need no type switch.
func PythonOf(env Environment) string {
	if pi, ok := env.(PythonInterpreter); ok {
		if p := pi.Python(); p != "" {
			return p
		}
	}
	return DefaultPython
}

// Errors callers can match with errors.Is. The errors returned wrap them
// and carry a message that names the path or process concerned.
var (
	// ErrClosed means the environment was closed; nothing new can start.
	ErrClosed = errors.New("environment: shell runtime is closed")
	// ErrOutsideWorkspace means a confined environment refused a path
	// that resolves outside its workspace, or beneath a root no tool may
	// reach (Options.Hidden).
	ErrOutsideWorkspace = errors.New("environment: path resolves outside the workspace")
	// ErrReadOnly means a confined environment refused to write beneath
	// a root it may only read (LocalOptions.AllowPaths, the sandbox's
	// read-only mounts).
	ErrReadOnly = errors.New("environment: path is read-only")
	// ErrBinary means a file is not UTF-8 text.
	ErrBinary = errors.New("environment: file is binary")
	// ErrTooLarge means a file exceeds the read size limit.
	ErrTooLarge = errors.New("environment: file is too large")
	// ErrIsDir means a directory was given where a file is needed.
	ErrIsDir = errors.New("environment: path is a directory")
	// ErrStdinClosed means stdin was not kept open or is already closed.
	ErrStdinClosed = errors.New("environment: stdin is closed")
)

// SignalError is the error Wait returns for a process that was killed by
// a signal, so callers can tell a kill from an exit code and report it the
// way shells do.
type SignalError struct {
	Signal syscall.Signal
}

// Error names the signal, as a shell would report it.
func (e *SignalError) Error() string {
	return "environment: process killed by signal " + e.Signal.String()
}

// ExitCode is the shell convention for a signal death, 128 plus the
// signal number.
func (e *SignalError) ExitCode() int { return 128 + int(e.Signal) }

// wrapError gives a sentinel a specific message while keeping it
// matchable with errors.Is.
type wrapError struct {
	msg string
	err error
}

func (e *wrapError) Error() string { return e.msg }
func (e *wrapError) Unwrap() error { return e.err }
