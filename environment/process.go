package environment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// localProcess is a host process leading its own process group.
//
// All three standard streams are os.Pipe files handed to exec.Cmd as
// *os.File, so exec starts no copying goroutines and Wait returns as soon
// as the process exits; the output pipes are then the caller's to read.
type localProcess struct {
	cmd   *exec.Cmd
	pid   int
	stdin *os.File // write end; nil unless Spec.KeepStdin
	// stdinTurn holds one token, taken by each stdin write: a write
	// abandoned by its ctx sets a deadline that must not cut another.
	stdinTurn chan struct{}
	stdout    *stream
	stderr    *stream
	waitDelay time.Duration

	exited  chan struct{} // closed after the process is reaped
	done    chan struct{} // closed after exited and the output has ended
	cut     chan struct{} // closed by cutOutput to end output now
	cutOnce sync.Once

	code int   // valid after exited
	err  error // valid after exited

	groupGone atomic.Bool // the process group was seen empty after exit

	kill      func()      // see launch.kill; may be nil
	alive     func() bool // see launch.alive; may be nil
	cleanup   func()      // see launch.cleanup; may be nil
	cleanOnce sync.Once
}

// runCleanup runs launch.cleanup once the process is done with it.
func (p *localProcess) runCleanup() {
	if p.cleanup != nil {
		p.cleanOnce.Do(p.cleanup)
	}
}

// startProcess wires pipes to cmd, starts it and the goroutine that reaps
// it. On error nothing is left open.
func startProcess(cmd *exec.Cmd, l launch, waitDelay time.Duration) (*localProcess, error) {
	keepStdin := l.keepStdin
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	if !keepStdin {
		// With no writer left, the child's first read of stdin is EOF.
		inW.Close()
		inW = nil
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	// The child has its own copies (or never started); the parent keeps
	// only its ends, so EOF arrives when the child side closes.
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		if inW != nil {
			inW.Close()
		}
		outR.Close()
		errR.Close()
		return nil, err
	}
	p := &localProcess{
		cmd:       cmd,
		pid:       cmd.Process.Pid,
		stdin:     inW,
		stdinTurn: make(chan struct{}, 1),
		stdout:    newStream(outR),
		stderr:    newStream(errR),
		waitDelay: waitDelay,
		exited:    make(chan struct{}),
		done:      make(chan struct{}),
		cut:       make(chan struct{}),
		kill:      l.kill,
		alive:     l.alive,
		cleanup:   l.cleanup,
	}
	go p.reap()
	return p, nil
}

// reap waits for the process, records its result, then waits for the
// output to end (or cuts it off waitDelay later) before closing done.
func (p *localProcess) reap() {
	err := p.cmd.Wait()
	p.code, p.err = exitResult(p.cmd.ProcessState, err)
	if p.stdin != nil {
		// Nobody is left to read it (descendants aside), and this frees
		// the descriptor if the caller never closes it.
		p.stdin.Close()
	}
	close(p.exited)

	timer := time.NewTimer(p.waitDelay)
	defer timer.Stop()
	outEOF, errEOF := p.stdout.eof, p.stderr.eof
	for outEOF != nil || errEOF != nil {
		select {
		case <-outEOF:
			outEOF = nil
		case <-errEOF:
			errEOF = nil
		case <-timer.C:
			outEOF, errEOF = nil, nil
		case <-p.cut:
			outEOF, errEOF = nil, nil
		}
	}
	p.stdout.abandon()
	p.stderr.abandon()
	close(p.done)
	if !p.groupAlive() {
		p.runCleanup()
	}
}

// exitResult turns a wait status into Wait's result.
func exitResult(ps *os.ProcessState, err error) (int, error) {
	if ps == nil {
		if err == nil {
			err = errors.New("no exit status")
		}
		return -1, fmt.Errorf("environment: wait: %w", err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, &SignalError{Signal: ws.Signal()}
	}
	return ps.ExitCode(), nil
}

func (p *localProcess) Stdout() io.Reader { return p.stdout }
func (p *localProcess) Stderr() io.Reader { return p.stderr }
func (p *localProcess) Pid() int          { return p.pid }

func (p *localProcess) Done() <-chan struct{} { return p.done }

func (p *localProcess) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *localProcess) Wait() (int, error) {
	<-p.exited
	return p.code, p.err
}

func (p *localProcess) WriteStdin(b []byte) error {
	_, err := p.WriteStdinContext(context.Background(), b)
	return err
}

// WriteStdinContext writes b to stdin, giving up when ctx ends: the
// pipe's write end is pollable (os.Pipe), so a past deadline wakes a write
// blocked on a full pipe.
func (p *localProcess) WriteStdinContext(ctx context.Context, b []byte) (int, error) {
	if p.stdin == nil {
		return 0, &wrapError{"environment: stdin is closed (spawn with Spec.KeepStdin to write to it)", ErrStdinClosed}
	}
	select {
	case p.stdinTurn <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("environment: write stdin: %w", ctx.Err())
	}
	defer func() { <-p.stdinTurn }()
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("environment: write stdin: %w", err)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = p.stdin.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	n, err := p.stdin.Write(b)
	if !stop() {
		<-fired
		_ = p.stdin.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
			return n, fmt.Errorf("environment: write stdin: process %d stopped reading it after %d of %d bytes: %w", p.pid, n, len(b), ctx.Err())
		case errors.Is(err, os.ErrClosed):
			return n, ErrStdinClosed
		case errors.Is(err, syscall.EPIPE):
			return n, fmt.Errorf("environment: write stdin: process %d no longer reads it: %w", p.pid, err)
		}
		return n, fmt.Errorf("environment: write stdin: %w", err)
	}
	return n, nil
}

func (p *localProcess) CloseStdin() error {
	if p.stdin == nil {
		return nil
	}
	if err := p.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("environment: close stdin: %w", err)
	}
	return nil
}

func (p *localProcess) Signal(kill bool) error {
	if kill {
		return p.signalGroup(syscall.SIGKILL)
	}
	return p.signalGroup(syscall.SIGTERM)
}

// signalGroup signals the process group, which the leader keeps alive
// until reaped and background descendants keep alive after that.
func (p *localProcess) signalGroup(sig syscall.Signal) error {
	if sig == syscall.SIGKILL && p.kill != nil {
		p.kill()
	}
	if p.groupGone.Load() {
		return nil
	}
	err := syscall.Kill(-p.pid, sig)
	if err == nil {
		return nil
	}
	if err == syscall.ESRCH {
		if !p.Running() {
			// The group ID may be reused by an unrelated process from
			// now on; never signal it again.
			p.groupGone.Store(true)
		}
		return nil
	}
	return fmt.Errorf("environment: signal process group %d: %w", p.pid, err)
}

// groupAlive reports whether any process is left in the group.
func (p *localProcess) groupAlive() bool {
	if p.alive != nil && p.alive() {
		return true
	}
	if p.groupGone.Load() {
		return false
	}
	if err := syscall.Kill(-p.pid, 0); err == syscall.ESRCH {
		if !p.Running() {
			p.groupGone.Store(true)
		}
		return false
	}
	return true
}

// cutOutput ends the output streams now instead of waitDelay after exit.
func (p *localProcess) cutOutput() {
	p.cutOnce.Do(func() { close(p.cut) })
}

// stream is the read end of an output pipe. It reads straight from the
// pipe until abandoned; after that a read returns only what is already
// buffered in the pipe and then io.EOF, so readers cannot hang on a pipe
// kept open by a descendant that outlived the process.
type stream struct {
	f           *os.File
	abandoned   atomic.Bool
	ended       atomic.Bool
	endOnce     sync.Once
	abandonOnce sync.Once
	eof         chan struct{} // closed when a reader has seen the end
}

func newStream(f *os.File) *stream {
	return &stream{f: f, eof: make(chan struct{})}
}

func (s *stream) Read(b []byte) (int, error) {
	if s.ended.Load() {
		return 0, io.EOF
	}
	if len(b) == 0 {
		return 0, nil
	}
	if s.abandoned.Load() {
		return s.readBuffered(b)
	}
	n, err := s.f.Read(b)
	switch {
	case n > 0:
		return n, nil
	case err == io.EOF, errors.Is(err, os.ErrClosed):
		s.end()
		return 0, io.EOF
	case errors.Is(err, os.ErrDeadlineExceeded):
		// abandon set a past deadline to wake this read.
		return s.readBuffered(b)
	}
	return n, err
}

// readBuffered reads without waiting: data already in the pipe is
// returned, an empty pipe ends the stream.
func (s *stream) readBuffered(b []byte) (int, error) {
	_ = s.f.SetReadDeadline(time.Time{})
	rc, err := s.f.SyscallConn()
	if err != nil {
		s.end()
		return 0, io.EOF
	}
	var n int
	var rerr error
	cerr := rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = syscall.Read(int(fd), b)
			if rerr != syscall.EINTR {
				return true // never wait for readiness
			}
		}
	})
	if cerr == nil && rerr == nil && n > 0 {
		return n, nil
	}
	// n == 0: every writer is gone; EAGAIN: a descendant holds the pipe
	// but has written nothing more. Either way the output ends here.
	s.end()
	return 0, io.EOF
}

// abandon switches the stream to non-blocking reads and wakes a reader
// blocked on an empty pipe.
func (s *stream) abandon() {
	s.abandonOnce.Do(func() {
		// Deadline first: a reader that sees abandoned, or is woken
		// by the deadline, clears it afterwards.
		_ = s.f.SetReadDeadline(time.Unix(1, 0))
		s.abandoned.Store(true)
	})
}

func (s *stream) end() {
	s.endOnce.Do(func() {
		s.ended.Store(true)
		s.f.Close()
		close(s.eof)
	})
}

var (
	_ Process            = (*localProcess)(nil)
	_ StdinContextWriter = (*localProcess)(nil)
)
