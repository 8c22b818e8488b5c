package runner

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/environment"
)

//go:embed child.py
var childSource string

// Defaults for the zero values of Options and Request. Package codemode
// uses the same constants for its [codemode] settings, so that there is
// one default per setting.
const (
	DefaultPython    = environment.DefaultPython
	DefaultMaxCalls  = 1000
	DefaultMaxOutput = 1 << 20
	// DefaultPool is how many interpreters a pre-starting Runner keeps
	// ready: enough that back-to-back and paired runs find one.
	DefaultPool = 2
	// DefaultIdle is how long a pre-starting Runner keeps its pool
	// without runs before it stops the interpreters, so an idle session
	// holds no Python processes.
	DefaultIdle = 2 * time.Minute
)

const (
	stopWait      = 3 * time.Second        // for the process to die after SIGKILL
	exitWait      = 1 * time.Second        // for a process whose stdout ended to exit by itself
	drainWait     = 500 * time.Millisecond // for output already sent when the run is stopped
	stderrWait    = 500 * time.Millisecond // for stderr to reach EOF after a crash
	maxStderr     = 64 << 10               // bytes of stderr kept
	msgBufferSize = 16
)

// errTimedOut is the cause of the context Run derives for Request.Timeout.
var errTimedOut = errors.New("runner: timeout")

// Options configure a Runner. The zero value runs DefaultPython on this
// machine without pre-starting.
type Options struct {
	// Python is the interpreter to start; "" means DefaultPython. Give
	// the real executable (environment.ResolvePython), not a version
	// manager's shim, which costs a second process on every start.
	Python string
	// Start starts the interpreter; nil means LocalStart("", nil).
	Start StartFunc
	// Prestart keeps a pool of interpreters started, past their imports
	// and waiting for code, so that Run pays no start-up. A Run takes
	// one and the pool is refilled in the background at once; when all
	// are taken, Run waits for one being started rather than start
	// another. Close kills them.
	Prestart bool
	// Pool is the number of interpreters Prestart keeps; 0 means
	// DefaultPool.
	Pool int
	// Idle is how long the pool is kept without a run before its
	// interpreters are stopped (the next Run starts them again); 0 means
	// DefaultIdle.
	Idle time.Duration
	// Memory is each interpreter's address-space limit in bytes
	// (RLIMIT_AS, set by the child before it reads any code, inherited by
	// its subprocesses); 0 means none. A process with CAP_SYS_RESOURCE
	// (root outside a sandbox) can raise it again.
	Memory int64
	// Fork, with Prestart, starts a fork server (see EnvForkStart) that
	// has done the child's imports and forks a fresh interpreter for
	// every run, so that concurrent runs start warm too; no pool is kept
	// then. While it is starting (first run, after Idle, after it died)
	// runs start their own interpreter. If it cannot start, Log says why
	// once and the Prestart pool is used instead.
	Fork ForkStartFunc
	// Log receives the fork server's failures; nil means slog.Default.
	Log *slog.Logger
}

// A Runner runs Python code, each run in a fresh interpreter. It is safe
// for concurrent use.
type Runner struct {
	python   string
	start    StartFunc
	prestart bool
	pool     int
	idle     time.Duration
	memory   string // the child's argument
	fork     ForkStartFunc
	log      *slog.Logger

	mu        sync.Mutex
	fsrv      *forkServer   // the running fork server, ready; nil if none
	fsrvStart bool          // a fork server is being started
	forkOff   bool          // the fork server failed for good: the pool is used
	forkFails []time.Time   // recent failures, for forkOff
	forkEver  bool          // a fork server has been ready once
	spares    []*child      // pre-started interpreters, ready or on their way
	starting  int           // background starts in flight
	waiting   int           // takers waiting for one of them
	changed   chan struct{} // closed (and replaced) when a start ends
	lastTake  time.Time
	idleTimer *time.Timer
	closed    bool
	done      chan struct{} // closed by Close
	wg        sync.WaitGroup
}

// New returns a Runner; opts may be nil. With Prestart it starts the pool
// in the background.
func New(opts *Options) *Runner {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Python == "" {
		o.Python = DefaultPython
	}
	if o.Start == nil {
		o.Start = LocalStart("", nil)
	}
	if o.Pool <= 0 {
		o.Pool = DefaultPool
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	r := &Runner{python: o.Python, start: o.Start, prestart: o.Prestart, pool: o.Pool, idle: o.Idle,
		memory: strconv.FormatInt(max(o.Memory, 0), 10), done: make(chan struct{}), changed: make(chan struct{}),
		fork: o.Fork, log: o.Log}
	if r.fork == nil {
		r.forkOff = true
	}
	if r.prestart {
		r.mu.Lock()
		r.lastTake = time.Now()
		r.startForkLocked()
		r.refillLocked()
		r.mu.Unlock()
	}
	return r
}

// Close kills the pre-started interpreters and waits for background
// starts in flight. Runs in progress are not affected; later ones fail
// with ErrClosed.
func (r *Runner) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.done)
	spares := r.spares
	r.spares = nil
	fsrv := r.fsrv
	r.fsrv = nil
	if r.idleTimer != nil {
		r.idleTimer.Stop()
	}
	r.mu.Unlock()
	for _, c := range spares {
		c.stop()
	}
	if fsrv != nil {
		fsrv.stop()
	}
	r.wg.Wait()
	return nil
}

// A Request is code to run and the tools it may call.
type Request struct {
	// Code is Python source; top-level await is allowed.
	Code string
	// Tools are the names callable as tools.<name>(...). A name that is
	// not a Python identifier is also reachable as its identifier form
	// (characters other than ASCII letters, digits and "_" become "_"; a
	// leading digit or a keyword, soft ones included, gets a "_" prefix),
	// which is how pystub.Identifier names it in the stub.
	Tools []string
	// Call serves one tool call; calls run concurrently, each on its own
	// goroutine, and ctx ends when Run returns. args is a JSON object.
	// The result must be JSON; an error's text is raised inside the code
	// as BubError (Bub's "[kind] message" form is expected). Run does not
	// return before every Call it started has returned.
	Call func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
	// Output, if not nil, receives stdout text as it arrives, in order,
	// on Run's goroutine, before Run returns.
	Output func(chunk string)
	// MaxCalls limits tool calls per run; later calls raise inside the
	// code. Zero means DefaultMaxCalls.
	MaxCalls int
	// MaxOutput is how many bytes of output Run keeps; past it, the
	// beginning is dropped and replaced by a line
	// "[... N bytes of output omitted ...]". Zero means DefaultMaxOutput.
	MaxOutput int
	// Timeout, if positive, limits the run; Run then fails with a
	// *TimeoutError that names it. A deadline on Run's context works too.
	Timeout time.Duration
}

// Run runs req.Code in a fresh interpreter and returns what it wrote to
// stdout. The output is returned on failure too, and is also in the
// error, which is a *CodeError, *TimeoutError, *CanceledError or
// *CrashError, or (failing to start) another error. Whatever happens, Run
// kills the interpreter's process group before it returns.
func (r *Runner) Run(ctx context.Context, req Request) (string, error) {
	started := time.Now()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, req.Timeout, errTimedOut)
		defer cancel()
	}
	s := &session{req: req, out: tailBuffer{max: req.MaxOutput}, tools: make(map[string]bool, len(req.Tools))}
	if s.out.max <= 0 {
		s.out.max = DefaultMaxOutput
	}
	if s.req.MaxCalls <= 0 {
		s.req.MaxCalls = DefaultMaxCalls
	}
	for _, name := range req.Tools {
		s.tools[name] = true
	}

	c, err := r.take(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", stopError(ctx, req.Timeout, started, "")
		}
		return "", err
	}
	s.c = c
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer func() {
		c.stop()
		cancelCalls()
		s.calls.Wait()
	}()

	if err := c.write(encodeRun(req.Code, newFilename(), req.Tools)); err != nil {
		return s.crashed()
	}
	exited := c.exited
	var grace <-chan time.Time
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				return s.crashed()
			}
			switch m.Type {
			case msgOutput:
				s.output(m.Data)
			case msgCall:
				s.call(callCtx, m)
			case msgDone:
				c.stop()
				out := s.out.String()
				return out, nil
			case msgFailed:
				c.stop()
				out := s.out.String()
				return out, newCodeError(m, out)
			}
		case <-exited:
			// Gone without a final message, or the message is still in the
			// pipe: kill what it left so that stdout reaches EOF.
			exited = nil
			c.proc.Signal(true)
			grace = time.After(stopWait)
		case <-grace:
			return s.crashed()
		case <-ctx.Done():
			c.proc.Signal(true)
			s.drain()
			c.stop()
			out := s.out.String()
			return out, stopError(ctx, req.Timeout, started, out)
		}
	}
}

// stopError is Run's error for a done ctx.
func stopError(ctx context.Context, timeout time.Duration, started time.Time, output string) error {
	if errors.Is(context.Cause(ctx), errTimedOut) {
		return &TimeoutError{Timeout: timeout, Output: output}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		d := timeout
		if dl, ok := ctx.Deadline(); ok {
			// Run starts a little after the caller set the deadline (more
			// on a loaded machine); to 10 ms, the caller's own figure is
			// what is reported, not 1.499 for 1.5.
			d = dl.Sub(started).Round(10 * time.Millisecond)
		}
		return &TimeoutError{Timeout: d, Output: output}
	}
	return &CanceledError{Err: ctx.Err(), Output: output}
}

func newFilename() string {
	var b [4]byte
	rand.Read(b[:])
	return "<run_code-" + hex.EncodeToString(b[:]) + ">"
}

// session is the state of one Run.
type session struct {
	req    Request
	c      *child
	out    tailBuffer
	tools  map[string]bool
	ncalls int
	calls  sync.WaitGroup
}

func (s *session) output(data string) {
	if data == "" {
		return
	}
	if s.req.Output != nil {
		s.req.Output(data)
	}
	s.out.WriteString(data)
}

// call serves a call message on a new goroutine.
func (s *session) call(ctx context.Context, m message) {
	s.ncalls++
	var fail string
	switch {
	case s.ncalls > s.req.MaxCalls:
		fail = fmt.Sprintf("[tool] too many tool calls: the limit is %d per run", s.req.MaxCalls)
	case !s.tools[m.Name]:
		fail = fmt.Sprintf("[tool] unknown tool %q", m.Name)
	case s.req.Call == nil:
		fail = "[tool] no tools are available"
	}
	args := m.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		if fail != "" {
			s.c.write(encodeError(m.ID, fail))
			return
		}
		value, err := s.invoke(ctx, m.Name, args)
		var line []byte
		if err == nil {
			line, err = encodeResult(m.ID, value)
			if err != nil {
				err = fmt.Errorf("tool result is not JSON serializable: %w", err)
			}
		}
		if err != nil {
			line = encodeError(m.ID, err.Error())
		}
		s.c.write(line)
	}()
}

// invoke calls req.Call, turning a panic into an error.
func (s *session) invoke(ctx context.Context, name string, args json.RawMessage) (value json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("[tool] tool %q panicked: %v", name, p)
		}
	}()
	return s.req.Call(ctx, name, args)
}

// drain collects output the child sent before it was killed.
func (s *session) drain() {
	timer := time.NewTimer(drainWait)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-s.c.msgs:
			if !ok {
				return
			}
			if m.Type == msgOutput {
				s.output(m.Data)
			}
		case <-timer.C:
			return
		}
	}
}

// crashed reports a child whose stdout ended without a final message.
func (s *session) crashed() (string, error) {
	c := s.c
	select {
	case <-c.exited:
	case <-time.After(exitWait):
	}
	c.stop()
	code := -1
	select {
	case <-c.exited:
		code = c.code
	default:
	}
	select {
	case <-c.stderrDone:
	case <-time.After(stderrWait):
	}
	out := s.out.String()
	return out, &CrashError{Code: code, Stderr: c.stderr.String(), Output: out}
}

// take returns a started interpreter: a ready one from the pool, else
// one the pool is starting, else a new one.
func (r *Runner) take(ctx context.Context) (*child, error) {
	if !r.prestart {
		return r.spawn(ctx)
	}
	if c, ok, err := r.takeForked(ctx); ok {
		return c, err
	}
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil, ErrClosed
		}
		r.lastTake = time.Now()
		if c := r.popReadyLocked(); c != nil {
			r.refillLocked()
			r.mu.Unlock()
			return c, nil
		}
		r.refillLocked()
		if r.starting <= r.waiting {
			// Every start in flight is spoken for: waiting would be
			// slower than starting one.
			r.mu.Unlock()
			return r.spawn(ctx)
		}
		r.waiting++
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.waiting--
		r.mu.Unlock()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// popReadyLocked takes a ready, live interpreter out of the pool, dropping
// dead ones. r.mu is held.
func (r *Runner) popReadyLocked() *child {
	for i := 0; i < len(r.spares); i++ {
		c := r.spares[i]
		select {
		case <-c.exited: // died while waiting
			r.spares = slices.Delete(r.spares, i, i+1)
			i--
			go c.stop()
		default:
			r.spares = slices.Delete(r.spares, i, i+1)
			return c
		}
	}
	return nil
}

// refillLocked starts interpreters in the background until the pool is
// full, and arms the idle timer. r.mu is held.
func (r *Runner) refillLocked() {
	if r.closed || !r.prestart {
		return
	}
	if !r.forkOff {
		// The fork server replaces the pool.
		r.armIdleLocked()
		return
	}
	for len(r.spares)+r.starting < r.pool {
		r.starting++
		r.wg.Add(1)
		go r.startSpare()
	}
	r.armIdleLocked()
}

// armIdleLocked (re)starts the idle timer. r.mu is held.
func (r *Runner) armIdleLocked() {
	if r.idleTimer == nil {
		r.idleTimer = time.AfterFunc(r.idle, r.shrink)
	} else {
		r.idleTimer.Reset(r.idle)
	}
}

// startSpare starts one interpreter, waits for its imports and adds it to
// the pool.
func (r *Runner) startSpare() {
	defer r.wg.Done()
	c, err := r.spawn(context.Background())
	if err == nil {
		select {
		case <-c.ready:
		case <-r.done:
		}
	}
	r.mu.Lock()
	r.starting--
	close(r.changed)
	r.changed = make(chan struct{})
	keep := err == nil && !r.closed
	if keep {
		r.spares = append(r.spares, c)
	}
	r.mu.Unlock()
	if err == nil && !keep {
		c.stop()
	}
}

// shrink stops the pool's interpreters once no run has taken one for
// r.idle.
func (r *Runner) shrink() {
	r.mu.Lock()
	if r.closed || time.Since(r.lastTake) < r.idle {
		if !r.closed {
			r.idleTimer.Reset(r.idle - time.Since(r.lastTake))
		}
		r.mu.Unlock()
		return
	}
	spares := r.spares
	r.spares = nil
	fsrv := r.fsrv
	r.fsrv = nil
	r.mu.Unlock()
	for _, c := range spares {
		c.stop()
	}
	if fsrv != nil {
		fsrv.stop()
	}
}

// Spares reports how many pre-started interpreters are ready now.
func (r *Runner) Spares() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.spares {
		select {
		case <-c.exited:
		default:
			n++
		}
	}
	return n
}

// WaitReady waits until the pool is full, starting what is missing, so
// that the next runs pay no start-up (a host can warm up before its first
// run; benchmarks measure warm runs). Without Prestart it returns nil at
// once.
func (r *Runner) WaitReady(ctx context.Context) error {
	if !r.prestart {
		return nil
	}
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return ErrClosed
		}
		r.lastTake = time.Now()
		r.refillLocked()
		full := len(r.spares) >= r.pool
		changed := r.changed
		var ahead, dead <-chan struct{}
		if !r.forkOff {
			full = false
			if fs := r.fsrv; fs != nil && fs.alive() {
				// Ready once it has the pool's children forked ahead.
				var n int
				n, ahead = fs.forkedAhead()
				full, dead = n >= r.pool, fs.dead
			} else {
				r.startForkLocked()
			}
		}
		r.mu.Unlock()
		if full {
			return nil
		}
		select {
		case <-changed:
		case <-ahead:
		case <-dead:
			// Found dead by the next take, which starts it again.
			r.mu.Lock()
			if r.fsrv != nil && !r.fsrv.alive() {
				fs := r.fsrv
				r.fsrv = nil
				r.forkFailedLocked(fs.err)
			}
			r.mu.Unlock()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// child is a started interpreter.
type child struct {
	proc       Process
	msgs       chan message  // protocol messages; closed at EOF
	ready      chan struct{} // closed at "ready" or EOF
	exited     chan struct{} // closed when Wait returns; then code is set
	code       int
	stderr     lockedTail
	stderrDone chan struct{}
	quit       chan struct{} // closed by stop: messages are discarded
	writeMu    sync.Mutex
	stopOnce   sync.Once
}

func (r *Runner) spawn(ctx context.Context) (*child, error) {
	p, err := r.start(ctx, []string{r.python, "-u", "-c", childSource, r.memory})
	if err != nil {
		return nil, fmt.Errorf("runner: start %s: %w", r.python, err)
	}
	return newChild(p), nil
}

// newChild starts reading a started interpreter.
func newChild(p Process) *child {
	c := &child{
		proc:       p,
		msgs:       make(chan message, msgBufferSize),
		ready:      make(chan struct{}),
		exited:     make(chan struct{}),
		stderr:     lockedTail{t: tailBuffer{max: maxStderr}},
		stderrDone: make(chan struct{}),
		quit:       make(chan struct{}),
	}
	go c.readStdout()
	go c.readStderr()
	go func() {
		c.code, _ = p.Wait()
		close(c.exited)
	}()
	return c
}

func (c *child) readStdout() {
	defer close(c.msgs)
	ready := false
	defer func() {
		if !ready {
			close(c.ready)
		}
	}()
	lr := newLineReader(c.proc.Stdout())
	for {
		line, err := lr.next()
		if len(line) > 0 {
			m := parseMessage(line)
			if m.Type == msgReady && !ready {
				ready = true
				close(c.ready)
			} else {
				select {
				case c.msgs <- m:
				case <-c.quit:
				}
			}
		}
		if errors.Is(err, errLineTooLong) {
			// The code wrote to the protocol descriptor itself: its run
			// is over, and nothing more is read from it.
			c.stderr.Write([]byte("\n[bub-mcp: " + err.Error() + " from the interpreter; it was killed]\n"))
			c.proc.Signal(true)
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *child) readStderr() {
	defer close(c.stderrDone)
	buf := make([]byte, 32<<10)
	r := c.proc.Stderr()
	for {
		n, err := r.Read(buf)
		c.stderr.Write(buf[:n])
		if err != nil {
			return
		}
	}
}

// write sends one protocol line.
func (c *child) write(line []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.proc.WriteStdin(line)
}

// stop kills the process group and waits up to stopWait for the process.
func (c *child) stop() {
	c.stopOnce.Do(func() {
		close(c.quit)
		c.proc.Signal(true)
		c.proc.CloseStdin()
		timer := time.NewTimer(stopWait)
		defer timer.Stop()
		select {
		case <-c.exited:
		case <-timer.C:
		}
	})
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped int
}

func (t *tailBuffer) WriteString(s string) {
	t.buf = append(t.buf, s...)
	t.trim(2 * t.max)
}

func (t *tailBuffer) Write(p []byte) {
	t.buf = append(t.buf, p...)
	t.trim(2 * t.max)
}

// trim keeps the last max bytes once more than limit are held.
func (t *tailBuffer) trim(limit int) {
	if len(t.buf) <= limit {
		return
	}
	cut := len(t.buf) - t.max
	// Do not keep half a character.
	for i := 0; i < utf8.UTFMax && cut < len(t.buf) && !utf8.RuneStart(t.buf[cut]); i++ {
		cut++
	}
	t.dropped += cut
	t.buf = append(t.buf[:0], t.buf[cut:]...)
}

// String returns the kept bytes, after a line saying how many were dropped.
func (t *tailBuffer) String() string {
	t.trim(t.max)
	if t.dropped == 0 {
		return string(t.buf)
	}
	return fmt.Sprintf("[... %d bytes of output omitted ...]\n", t.dropped) + string(t.buf)
}

// lockedTail is a tailBuffer safe for concurrent use.
type lockedTail struct {
	mu sync.Mutex
	t  tailBuffer
}

func (l *lockedTail) Write(p []byte) {
	l.mu.Lock()
	l.t.Write(p)
	l.mu.Unlock()
}

func (l *lockedTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.String()
}
