package runner

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bubbuild/bub-mcp/environment"
)

//go:embed forkserver.py
var forkServerSource string

// A ForkStartFunc starts a fork server: argv as a process with files as
// its descriptors 3, 4, ..., returning the process and what each forked
// child must get (environment.ForkServerHost.StartForkServer).
type ForkStartFunc func(ctx context.Context, argv []string, files []*os.File) (Process, *environment.ForkPolicy, error)

// EnvForkStart returns a ForkStartFunc over env's fork-server support, or
// nil when env has none (environment.ForkServerHost).
func EnvForkStart(env environment.Environment) ForkStartFunc {
	h, ok := env.(environment.ForkServerHost)
	if !ok {
		return nil
	}
	return func(ctx context.Context, argv []string, files []*os.File) (Process, *environment.ForkPolicy, error) {
		p, pol, err := h.StartForkServer(ctx, environment.Spec{Argv: argv}, files)
		if err != nil {
			return nil, nil, err
		}
		return envProcess{p}, pol, nil
	}
}

const (
	forkStartWait = 30 * time.Second // for a fork server's imports (and sandbox probe)
	forkHelloWait = 10 * time.Second // for a forked child's first word
	forkOutWait   = 2 * time.Second  // output kept open after a forked child exits
)

// errForkUnavailable marks a fork server that started but said it cannot
// fork here (the sandbox's namespaces could not be made).
var errForkUnavailable = errors.New("runner: fork server unavailable")

// forkServer is the host's side of one running fork server
// (forkserver.py). Host and server speak over a SOCK_SEQPACKET socket,
// one JSON object per packet:
//
//	host → server: {"memory":"N","unshare":[...],"spares":N} once, first
//	               {"id":N} with the child's stdin, stdout and stderr
//	               pipe ends and one end of a per-child socket (SCM_RIGHTS)
//	server → host: {"type":"ready"} | {"type":"unavailable","error":"..."}
//	               {"type":"exit","id":N,"code":C} | {"type":"fail","id":N,"error":"..."}
//	               {"type":"spares","n":N}  children forked ahead now
//
// A forked child says "hello" on its per-child socket; the kernel attaches
// its pid as this process sees it (SCM_CREDENTIALS), which is how the host
// holds a child in another pid namespace. The host adopts it
// (ForkPolicy.Adopt) and answers "go"; only then does the child run the
// interpreter's child code, which speaks the run protocol on the pipes
// exactly as a started interpreter does.
type forkServer struct {
	proc   Process
	ctl    *net.UnixConn
	policy *environment.ForkPolicy
	stderr lockedTail

	writeMu sync.Mutex
	mu      sync.Mutex
	nextID  int64
	pending map[int64]*forkedProc
	ready   chan struct{} // closed at "ready"
	spares  int           // children forked ahead, as last reported
	update  chan struct{} // closed (and replaced) when spares changes
	dead    chan struct{} // closed when the control socket ends
	err     error         // why it ended or is unavailable; set before dead is closed
	stopped sync.Once
}

// startForkServer starts a fork server and waits until it is ready to fork.
// It gives up when done is closed.
// spares is how many children it keeps forked ahead.
func startForkServer(start ForkStartFunc, python, memory string, spares int, done <-chan struct{}) (*forkServer, error) {
	host, srv, err := seqpacketPair()
	if err != nil {
		return nil, err
	}
	argv := []string{python, "-u", "-c", forkServerSource, childSource}
	p, pol, err := start(context.Background(), argv, []*os.File{srv})
	srv.Close()
	if err != nil {
		host.Close()
		return nil, fmt.Errorf("runner: start fork server: %w", err)
	}
	if pol == nil || pol.Adopt == nil {
		host.Close()
		p.Signal(true)
		return nil, errors.New("runner: start fork server: the environment gave no fork policy")
	}
	fs := &forkServer{proc: p, ctl: host, policy: pol, pending: map[int64]*forkedProc{},
		ready: make(chan struct{}), update: make(chan struct{}), dead: make(chan struct{}), stderr: lockedTail{t: tailBuffer{max: maxStderr}}}
	go fs.readStderr()
	unshare := pol.Unshare
	if unshare == nil {
		unshare = []string{}
	}
	conf, _ := json.Marshal(map[string]any{"memory": memory, "unshare": unshare, "spares": spares})
	if err := fs.send(conf, nil); err != nil {
		fs.stop()
		return nil, fmt.Errorf("runner: start fork server: %w", err)
	}
	go fs.readCtl()
	timer := time.NewTimer(forkStartWait)
	defer timer.Stop()
	select {
	case <-fs.ready:
		return fs, nil
	case <-fs.dead:
		fs.stop()
		return nil, fs.err
	case <-timer.C:
		fs.stop()
		return nil, fmt.Errorf("runner: fork server not ready after %v%s", forkStartWait, fs.stderrNote())
	case <-done:
		fs.stop()
		return nil, ErrClosed
	}
}

func (fs *forkServer) readStderr() {
	buf := make([]byte, 4096)
	r := fs.proc.Stderr()
	for {
		n, err := r.Read(buf)
		fs.stderr.Write(buf[:n])
		if err != nil {
			return
		}
	}
}

func (fs *forkServer) stderrNote() string {
	if s := strings.TrimSpace(fs.stderr.String()); s != "" {
		return ": " + s
	}
	return ""
}

// send writes one packet, with fds passed along.
func (fs *forkServer) send(msg []byte, fds []int) error {
	fs.writeMu.Lock()
	defer fs.writeMu.Unlock()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err := fs.ctl.WriteMsgUnix(msg, oob, nil)
	return err
}

// ctlMessage is any server → host packet.
type ctlMessage struct {
	Type  string `json:"type"`
	ID    int64  `json:"id"`
	Code  int    `json:"code"`
	N     int    `json:"n"`
	Error string `json:"error"`
}

// readCtl dispatches the server's packets until the socket ends; then
// every child still pending is killed and reported as exited.
func (fs *forkServer) readCtl() {
	buf := make([]byte, 64<<10)
	err := errors.New("runner: fork server exited")
	for {
		n, _, _, _, rerr := fs.ctl.ReadMsgUnix(buf, nil)
		if rerr != nil || n == 0 {
			break
		}
		var m ctlMessage
		if json.Unmarshal(buf[:n], &m) != nil {
			continue
		}
		switch m.Type {
		case "ready":
			close(fs.ready)
		case "spares":
			fs.mu.Lock()
			fs.spares = int(m.N)
			close(fs.update)
			fs.update = make(chan struct{})
			fs.mu.Unlock()
		case "unavailable":
			err = fmt.Errorf("%w: %s", errForkUnavailable, m.Error)
		case "exit", "fail":
			fs.mu.Lock()
			fp := fs.pending[m.ID]
			delete(fs.pending, m.ID)
			fs.mu.Unlock()
			if fp != nil {
				if m.Type == "fail" {
					fp.failed(m.Error)
				}
				fp.exit(m.Code)
			}
		}
	}
	fs.mu.Lock()
	fs.err = fmt.Errorf("%w%s", err, fs.stderrNote())
	pending := fs.pending
	fs.pending = nil
	fs.mu.Unlock()
	close(fs.dead)
	for _, fp := range pending {
		fp.exit(-1)
	}
	fs.stop()
}

// alive reports whether the server can still fork.
func (fs *forkServer) alive() bool {
	select {
	case <-fs.dead:
		return false
	default:
		return true
	}
}

// stop kills the server; its children in flight are killed by their own
// trees as their runs end (a sandbox's die with it).
func (fs *forkServer) stop() {
	fs.stopped.Do(func() {
		fs.proc.Signal(true)
		fs.ctl.Close()
		go fs.proc.Wait()
	})
}

// fork forks a child and returns it adopted and running the child code.
func (fs *forkServer) fork(ctx context.Context) (*forkedProc, error) {
	fp, fds, run, err := newForkedProc()
	if err != nil {
		return nil, err
	}
	defer run.Close()
	fs.mu.Lock()
	if fs.pending == nil {
		fs.mu.Unlock()
		fp.closeAll()
		closeFDs(fds)
		return nil, fs.err
	}
	fs.nextID++
	id := fs.nextID
	fs.pending[id] = fp
	fs.mu.Unlock()
	req, _ := json.Marshal(map[string]int64{"id": id})
	err = fs.send(req, fds)
	closeFDs(fds)
	if err != nil {
		fs.forget(id)
		fp.closeAll()
		return nil, fmt.Errorf("runner: fork: %w", err)
	}
	pid, err := readHello(ctx, run)
	if err != nil {
		fs.forget(id)
		fp.closeAll()
		fp.mu.Lock()
		if fp.note != "" {
			err = fmt.Errorf("%w (%s)", err, fp.note)
		}
		fp.mu.Unlock()
		return nil, fmt.Errorf("runner: forked child: %w", err)
	}
	tree, err := fs.policy.Adopt(pid)
	if err != nil {
		fs.forget(id)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		fp.closeAll()
		return nil, err
	}
	fp.setTree(tree)
	if _, err := run.Write([]byte("go")); err != nil {
		fs.forget(id)
		tree.Release()
		fp.closeAll()
		return nil, fmt.Errorf("runner: forked child: %w", err)
	}
	return fp, nil
}

// forget drops a pending child that failed to start.
func (fs *forkServer) forget(id int64) {
	fs.mu.Lock()
	if fs.pending != nil {
		delete(fs.pending, id)
	}
	fs.mu.Unlock()
}

// readHello reads the child's "hello" and the pid the kernel attached.
func readHello(ctx context.Context, run *net.UnixConn) (int, error) {
	deadline := time.Now().Add(forkHelloWait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	run.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { run.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	n, oobn, _, _, err := run.ReadMsgUnix(buf, oob)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, err
	}
	if n == 0 || string(buf[:n]) != "hello" {
		return 0, errors.New("ended before it said hello")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if cred, err := unix.ParseUnixCredentials(&m); err == nil && cred.Pid > 0 {
			return int(cred.Pid), nil
		}
	}
	return 0, errors.New("no credentials with its hello")
}

// seqpacketPair returns a connected pair of SOCK_SEQPACKET Unix sockets:
// the host's as a *net.UnixConn, the other as a file to pass on. The host's
// receives credentials (SO_PASSCRED).
func seqpacketPair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("runner: socketpair: %w", err)
	}
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("runner: SO_PASSCRED: %w", err)
	}
	hf := os.NewFile(uintptr(fds[0]), "bub-fork-host")
	c, err := net.FileConn(hf)
	hf.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("runner: socketpair: %w", err)
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "bub-fork-peer"), nil
}

// forkedProc is a forked child as a Process. Its stdio are pipes the
// host made; Wait ends at the server's exit report.
type forkedProc struct {
	stdin  *os.File
	stdout *pipeEnd
	stderr *pipeEnd

	mu       sync.Mutex
	tree     *environment.ForkedTree
	note     string // the server's word when the fork failed
	exited   chan struct{}
	code     int
	exitOnce sync.Once
}

// newForkedProc makes the child's pipes and per-child socket: fds are the
// child's ends (to pass and close), run the host's end of the socket.
func newForkedProc() (*forkedProc, []int, *net.UnixConn, error) {
	var opened []*os.File
	fail := func(err error) (*forkedProc, []int, *net.UnixConn, error) {
		for _, f := range opened {
			f.Close()
		}
		return nil, nil, nil, fmt.Errorf("runner: fork: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	opened = append(opened, inR, inW)
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	opened = append(opened, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	opened = append(opened, errR, errW)
	run, peer, err := seqpacketPair()
	if err != nil {
		return fail(err)
	}
	// The child's ends are duplicated into plain descriptors so that the
	// *os.File wrappers can be dropped at once; the host keeps its ends.
	var fds []int
	for _, f := range []*os.File{inR, outW, errW, peer} {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			closeFDs(fds)
			peer.Close()
			run.Close()
			return fail(err)
		}
		fds = append(fds, fd)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	peer.Close()
	fp := &forkedProc{stdin: inW, stdout: newPipeEnd(outR), stderr: newPipeEnd(errR), exited: make(chan struct{})}
	return fp, fds, run, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func (p *forkedProc) setTree(t *environment.ForkedTree) {
	p.mu.Lock()
	p.tree = t
	p.mu.Unlock()
}

func (p *forkedProc) failed(note string) {
	p.mu.Lock()
	p.note = note
	p.mu.Unlock()
}

// exit records the child's end: what is left of its tree is killed (a run
// is over when its interpreter is), and its output is cut a little later
// if something escaped and holds it.
func (p *forkedProc) exit(code int) {
	p.exitOnce.Do(func() {
		p.code = code
		close(p.exited)
		p.mu.Lock()
		t := p.tree
		p.mu.Unlock()
		if t != nil {
			go t.Release()
		}
		p.stdin.Close()
		go func() {
			timer := time.NewTimer(forkOutWait)
			defer timer.Stop()
			for _, e := range []*pipeEnd{p.stdout, p.stderr} {
				select {
				case <-e.eof:
				case <-timer.C:
				}
			}
			p.stdout.f.Close()
			p.stderr.f.Close()
		}()
	})
}

// closeAll frees a child that never started.
func (p *forkedProc) closeAll() {
	p.stdin.Close()
	p.stdout.f.Close()
	p.stderr.f.Close()
}

func (p *forkedProc) WriteStdin(b []byte) error {
	_, err := p.stdin.Write(b)
	return err
}

func (p *forkedProc) CloseStdin() error { return p.stdin.Close() }
func (p *forkedProc) Stdout() io.Reader { return p.stdout }
func (p *forkedProc) Stderr() io.Reader { return p.stderr }

func (p *forkedProc) Wait() (int, error) {
	<-p.exited
	return p.code, nil
}

func (p *forkedProc) Signal(kill bool) error {
	p.mu.Lock()
	t := p.tree
	p.mu.Unlock()
	if t == nil {
		return nil
	}
	if kill {
		t.Signal(syscall.SIGKILL)
	} else {
		t.Signal(syscall.SIGTERM)
	}
	return nil
}

// pipeEnd is the host's read end of a child's output pipe; eof is closed
// at its end.
type pipeEnd struct {
	f    *os.File
	eof  chan struct{}
	once sync.Once
}

func newPipeEnd(f *os.File) *pipeEnd { return &pipeEnd{f: f, eof: make(chan struct{})} }

func (e *pipeEnd) Read(b []byte) (int, error) {
	n, err := e.f.Read(b)
	if err != nil {
		e.once.Do(func() { close(e.eof) })
		if !errors.Is(err, io.EOF) {
			err = io.EOF // closed after the child's end: nothing more comes
		}
	}
	return n, err
}

var _ Process = (*forkedProc)(nil)

// forkFailWindow and forkMaxFails decide when a fork server that keeps
// dying is given up for the pool.
const (
	forkFailWindow = time.Minute
	forkMaxFails   = 3
)

// takeForked forks an interpreter from the fork server. ok is false when
// the pool is to be used instead (no fork server, or it failed for good).
// While the server is (re)starting, the run starts its own interpreter.
func (r *Runner) takeForked(ctx context.Context) (c *child, ok bool, err error) {
	r.mu.Lock()
	if r.forkOff {
		r.mu.Unlock()
		return nil, false, nil
	}
	if r.closed {
		r.mu.Unlock()
		return nil, true, ErrClosed
	}
	r.lastTake = time.Now()
	r.armIdleLocked()
	fs := r.fsrv
	if fs != nil && !fs.alive() {
		r.fsrv = nil
		r.forkFailedLocked(fs.err)
		fs = nil
	}
	if fs == nil {
		r.startForkLocked()
		r.mu.Unlock()
		c, err := r.spawn(ctx)
		return c, true, err
	}
	r.mu.Unlock()
	fp, err := fs.fork(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, true, ctx.Err()
		}
		fs.stop()
		r.mu.Lock()
		if r.fsrv == fs {
			r.fsrv = nil
			r.forkFailedLocked(err)
		}
		r.mu.Unlock()
		c, err := r.spawn(ctx)
		return c, true, err
	}
	return newChild(fp), true, nil
}

// startForkLocked starts the fork server in the background unless it is
// running or starting. r.mu is held.
func (r *Runner) startForkLocked() {
	if r.fsrvStart || r.closed || r.forkOff {
		return
	}
	r.fsrvStart = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fs, err := startForkServer(r.fork, r.python, r.memory, r.pool, r.done)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.fsrvStart = false
		close(r.changed)
		r.changed = make(chan struct{})
		switch {
		case err != nil:
			if !r.forkEver {
				// It never started here: the environment cannot host
				// one, and trying again would fail again.
				r.forkFails = make([]time.Time, forkMaxFails)
			}
			r.forkFailedLocked(err)
		case r.closed:
			fs.stop()
		default:
			r.forkEver = true
			r.fsrv = fs
		}
	}()
}

// forkFailedLocked notes that the fork server failed; too many failures
// (or one that says it cannot work here) turn it off for the pool. r.mu
// is held.
func (r *Runner) forkFailedLocked(err error) {
	if r.closed || r.forkOff {
		return
	}
	now := time.Now()
	recent := r.forkFails[:0]
	for _, t := range r.forkFails {
		if t.IsZero() || now.Sub(t) < forkFailWindow {
			recent = append(recent, t)
		}
	}
	r.forkFails = append(recent, now)
	if errors.Is(err, errForkUnavailable) || len(r.forkFails) >= forkMaxFails {
		r.forkOff = true
		r.log.Warn("codemode.forkserver.off", "python", r.python, "error", err,
			"effect", "runs use a pool of pre-started interpreters instead")
		r.refillLocked()
		return
	}
	r.log.Warn("codemode.forkserver.failed", "python", r.python, "error", err,
		"effect", "started again at the next run")
}

// Forking reports whether runs are forked from a running fork server now
// (rather than started or taken from the pool).
func (r *Runner) Forking() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.forkOff && r.fsrv != nil && r.fsrv.alive()
}

// forkedAhead returns how many children the server has forked ahead and
// a channel closed when that changes.
func (fs *forkServer) forkedAhead() (int, <-chan struct{}) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.spares, fs.update
}
