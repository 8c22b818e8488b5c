// Package stdio serves an mcpserver.Server to one client over a pair of
// streams (a process's stdin and stdout), one JSON-RPC message per line,
// within the server's Limits.
package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/edge"
	"github.com/bubbuild/bub-mcp/mcpserver/internal/mcpgofix"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Serve serves one client of srv on in/out until in closes or ctx ends. On
// ctx's end, in-flight calls get grace to finish before they are
// cancelled; when in closes they are cancelled at once (the client is
// gone). Nothing but protocol is written to out.
//
// The transport is bub-mcp's own rather than mcp-go's StdioServer, with
// mcp-go's MCPServer.HandleMessage answering every request, so the
// protocol logic stays mcp-go's. What differs is the plumbing around it:
// each line is parsed once (StdioServer parses it five times before
// HandleMessage sees it, probing for responses to its own requests), one
// write(2) per message, no goroutine per read, a request that came alone
// served on the reading goroutine (runInline), and a tool's progress and
// log notifications are written in order before its result (StdioServer
// queues them to a goroutine that may write them after the result, when
// the client drops them).
//
// StdioServer (mcp-go v1.2.1 server/stdio.go) cannot hold what issue 11
// asks of this transport either: its session is the package variable
// stdioSessionInstance, shared by every StdioServer in a process, so two
// Apps in one process (TestTwoAppsAreIndependent) would share one client;
// it reads lines with an unbounded ReadString, so max_message_bytes could
// not be kept without parsing every line a second time in a wrapper; a
// full tool-call queue runs the call on the read loop instead of refusing
// it; and it answers tools/call before initialize. Each of these is
// covered by a test (TestStdioBounds, TestOnePipeline, TestWire).
func Serve(ctx context.Context, srv *mcpserver.Server, in io.Reader, out io.Writer, conn providers.Connection, grace time.Duration) error {
	conn.Transport = "stdio"
	calls, cancelCalls := context.WithCancel(context.Background())
	defer cancelCalls()
	core := srv.Transport()
	c := newStdioConn(core, out)
	c.id = "stdio-" + strconv.FormatInt(core.NextSessionID(), 10)
	if err := c.mcp.RegisterSession(calls, c); err != nil {
		return fmt.Errorf("mcpserver: stdio session: %w", err)
	}
	defer c.mcp.UnregisterSession(context.Background(), c.id)
	c.caller = conn
	base := c.mcp.WithContext(calls, c)
	go c.pump(calls)

	c.in = bufio.NewReaderSize(in, 64<<10)
	c.readCtx, c.readErr = base, make(chan error, 1)
	go c.read()
	// Calls in flight get the grace period to finish and answer, both on a
	// signal (ctx) and when the client closes its input: a script that
	// pipes its requests in (printf … | bub-mcp serve) closes it after the
	// last one and reads the answers. After the input's end a signal cuts
	// them at once.
	var readErr error
	stop := context.Background()
	select {
	case err := <-c.readErr:
		close(c.inputEnded)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
			readErr = err
		}
		stop = ctx
	case <-ctx.Done():
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	graceTimer := time.NewTimer(grace)
	defer graceTimer.Stop()
	cut := func(reason string) {
		c.log.Warn("mcp.stdio.shutdown.cancelling", "reason", reason)
		core.CutCalls() // calls still running answer "server shutting down"
	}
	select {
	case <-done:
	case <-graceTimer.C:
		cut("grace period over")
	case <-stop.Done():
		cut("signal after the input's end")
	}
	// A cut call answers once it has stopped; cancelling its request
	// before that would drop the answer.
	select {
	case <-done:
	case <-time.After(edge.ShutdownTimeout):
	}
	cancelCalls()
	// The reader may still be blocked on in; it ends with the process.
	return readErr
}

// stdioConn is the one client of a stdio transport and its mcp-go
// ClientSession: logging level, client info, and the server's own
// requests to the client (sampling, elicitation, roots).
type stdioConn struct {
	core    edge.Core
	mcp     *server.MCPServer
	log     *slog.Logger
	limits  edge.Limits
	id      string
	caller  providers.Connection // as the transport knows it
	out     io.Writer
	wmu     sync.Mutex // guards queued, spare, writing (see write)
	queued  []byte
	spare   []byte
	writing bool
	wg      sync.WaitGroup
	sem     chan struct{} // bounds the requests running at once
	queue   chan struct{} // bounds the requests running or waiting

	pool *pool // runs requests that arrive while others wait to be read

	// One goroutine at a time reads in (see read and runInline).
	in      *bufio.Reader
	readCtx context.Context
	readErr chan error // the reader that meets the end of in sends it here
	// inputEnded is closed when in has ended: a request to the client
	// (sampling, elicitation, roots) can get no answer any more.
	inputEnded chan struct{}

	notes       chan mcp.JSONRPCNotification
	initialized atomic.Bool  // mcp-go's: also set by a 2026-07-28 request
	handshook   atomic.Bool  // a 2025 initialize was answered
	modern      atomic.Bool  // a 2026-07-28 request came: that era needs no initialize
	level       atomic.Value // mcp.LoggingLevel

	infoMu  sync.RWMutex
	info    mcp.Implementation
	caps    mcp.ClientCapabilities
	version string

	nextID  atomic.Int64
	pendMu  sync.Mutex
	pending map[int64]chan rpcReply
}

// rpcReply is the client's answer to one of the server's requests.
type rpcReply struct {
	result json.RawMessage
	err    *mcp.JSONRPCErrorDetails
}

func newStdioConn(core edge.Core, out io.Writer) *stdioConn {
	l := core.Limits()
	return &stdioConn{
		core:    core,
		mcp:     core.MCP(),
		log:     core.Logger(),
		limits:  l,
		out:     out,
		sem:     make(chan struct{}, l.MaxConcurrentPerClient),
		queue:   make(chan struct{}, 2*l.MaxConcurrentPerClient),
		pool:    newPool(l.MaxConcurrentPerClient, poolIdle),
		notes:   make(chan mcp.JSONRPCNotification, 100),
		pending: map[int64]chan rpcReply{},

		inputEnded: make(chan struct{}),
	}
}

// read serves c.in line by line until it ends, then sends the error that
// ended it to c.readErr; or until it handed reading to another goroutine
// (runInline), then it just returns.
func (c *stdioConn) read() {
	for {
		line, tooLong, err := readLine(c.in, c.limits.MaxMessageBytes)
		switch {
		case tooLong:
			c.log.Warn("mcp.stdio.message.too_long", "limit_bytes", c.limits.MaxMessageBytes)
			c.writeMessage(rpcError(edge.IDFromPrefix(line), mcp.INVALID_REQUEST, edge.TooLargeMessage(c.limits.MaxMessageBytes)))
		case len(bytes.TrimSpace(line)) > 0:
			if !c.dispatch(c.readCtx, line, c.core.Reclaimer().Begin(len(line))) {
				return
			}
		}
		if err != nil {
			c.readErr <- err
			return
		}
	}
}

// readLine returns the next line, a fresh slice (handlers keep it). A
// line over limit bytes is discarded, never held whole, and reported as
// tooLong; line is then its first limit bytes at most, where the request's
// id may be found (idFromPrefix).
func readLine(r *bufio.Reader, limit int64) (line []byte, tooLong bool, err error) {
	frag, err := r.ReadSlice('\n')
	if int64(len(frag)) > limit {
		line = bytes.Clone(frag[:limit])
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		return line, true, err
	}
	line = bytes.Clone(frag)
	for errors.Is(err, bufio.ErrBufferFull) {
		frag, err = r.ReadSlice('\n')
		if int64(len(line)+len(frag)) > limit {
			line = append(line, frag[:limit-int64(len(line))]...)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			return line, true, err
		}
		line = append(line, frag...)
	}
	return line, false, err
}

// parseError answers a line that is no JSON-RPC message.
func (c *stdioConn) parseError() { c.writeMessage(parseErrorAnswer()) }

func parseErrorAnswer() mcp.JSONRPCError { return rpcError(nil, mcp.PARSE_ERROR, "Parse error") }

// dispatch routes one message: responses to the server's own requests go
// to their waiter, notifications are handled in order on the read loop,
// requests concurrently (bounded by the worker count), so a slow one never
// stalls the others: on a pooled goroutine when more messages are already
// buffered, else on this one (runInline).
//
// done is called once the message is handled. dispatch reports whether
// the calling goroutine still reads.
func (c *stdioConn) dispatch(ctx context.Context, line []byte, done func()) (reading bool) {
	async := false
	defer func() {
		if !async {
			done()
		}
	}()
	env, err := edge.ParseEnvelope(line)
	if err != nil && mcpgofix.IsBatch(line) {
		c.writeMessage(rpcError(nil, mcp.INVALID_REQUEST, mcpgofix.ErrBatch.Error()))
		return true
	}
	if err != nil {
		c.parseError()
		return true
	}
	hasID := env.HasID()
	if env.Method == "" && hasID && (env.Result != nil || env.Error != nil) {
		c.reply(env)
		return true
	}
	if mcpgofix.NoMethod(env.Method, env.ID, env.Result, env.Error != nil) {
		c.writeMessage(rpcError(env.ID, mcp.INVALID_REQUEST, mcpgofix.ErrNoMethod.Error()))
		return true
	}
	if !hasID && !mcpgofix.NullID(env.Method, env.ID) { // a null id is refused with the odd ones below
		if resp := c.handle(ctx, line); resp != nil {
			c.writeMessage(resp)
		}
		return true
	}
	valid, big := mcpgofix.IDKind(env.ID)
	if !valid {
		c.writeMessage(rpcError(nil, mcp.INVALID_REQUEST, mcpgofix.ErrOddID.Error()))
		return true
	}
	if !c.handshook.Load() && env.Method != string(mcp.MethodInitialize) && env.Method != string(mcp.MethodPing) && env.Method != "server/discover" && !c.sawModern(&env) {
		// 2025-11-25: nothing but ping before initialize; nothing runs.
		msg := "the session is not initialized: send initialize first"
		if c.modern.Load() {
			msg += " (a 2026-07-28 request carries " + mcp.MetaKeyProtocolVersion + " in its _meta)"
		}
		c.writeMessage(rpcError(env.ID, mcp.INVALID_REQUEST, msg))
		return true
	}
	rq := &request{stdioConn: c}
	ctx, caller := c.core.Begin(ctx, nil, rq)
	*caller = c.caller
	serve := func(ctx context.Context) mcp.JSONRPCMessage { return c.handle(ctx, line) }
	if f := c.core.Methods().Lookup(env.Method); f != nil {
		// An extension method (mcpgofix/methods.go) echoes its id itself.
		serve = func(ctx context.Context) mcp.JSONRPCMessage { return mcpgofix.Answer(ctx, c.log, f, line) }
	} else {
		if env.Method == string(mcp.MethodToolsCall) && c.modern.Load() && c.core.NeedsAdmission(env) {
			if e := c.core.Admit(ctx, line); e != nil {
				c.writeMessage(*e)
				return true
			}
		}
		if big {
			serve = func(ctx context.Context) mcp.JSONRPCMessage { return c.bigIDAnswer(ctx, env, line) }
		}
	}
	// Up to the limit run, as many again wait their turn; beyond that a
	// request is refused instead of queueing without bound.
	select {
	case c.queue <- struct{}{}:
	default:
		c.writeMessage(rpcError(env.ID, mcp.INTERNAL_ERROR, edge.BusyMessage))
		return true
	}
	c.wg.Add(1)
	async = true
	job := func() {
		defer c.wg.Done()
		defer done()
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			<-c.queue
			return
		}
		resp := serve(ctx)
		<-c.sem // free before answering: a client may send its next request at once
		<-c.queue
		if resp != nil && !rq.dropped.Load() {
			c.writeMessage(resp)
		}
	}
	if env.Method == string(mcp.MethodInitialize) {
		// What follows initialize is served as of its answer: a client
		// that sends its first requests without waiting for that answer
		// (a script piping lines in) must not see them refused as "not
		// initialized" because initialize still ran elsewhere. Initialize
		// asks the client nothing, so reading may wait for it.
		job()
		return true
	}
	if c.in.Buffered() > 0 {
		c.pool.Go(job)
		return true
	}
	return c.runInline(rq, job)
}

// inlineWait is how long a request runs on the reading goroutine before
// reading goes on in another: the longest a message that arrives meanwhile
// waits to be read.
const inlineWait = time.Millisecond

// runInline runs job, a request the client sent when nothing else was
// buffered, on the reading goroutine. Such a client usually waits for the
// answer, and handing the request to another goroutine costs more than a
// quick request itself: a thread woken and put back to sleep each time,
// ~40% of an echo call's CPU (BenchmarkEchoPaired, stdio, c=1). If job
// still runs after inlineWait, or asks the client something (passReading),
// reading goes on in a new goroutine, and this one ends with job. It
// reports whether the caller still reads.
func (c *stdioConn) runInline(rq *request, job func()) bool {
	b := &baton{c: c}
	rq.baton = b
	t := time.AfterFunc(inlineWait, func() {
		if b.pass() {
			c.read()
		}
	})
	job()
	t.Stop()
	return b.keep()
}

// baton is the reading role lent to a request run inline: exactly one of
// pass (reading moves to another goroutine) and keep (the request is done
// and its goroutine reads on) wins.
type baton struct {
	c      *stdioConn
	once   sync.Once
	passed bool
}

// pass takes the reading role from the inline request; it reports whether
// the caller got it and must read.
func (b *baton) pass() (got bool) {
	b.once.Do(func() { b.passed, got = true, true })
	return got
}

// keep ends the lending; it reports whether the request's goroutine still
// reads.
func (b *baton) keep() bool {
	b.once.Do(func() {})
	return !b.passed
}

// passReading makes sure someone reads while ctx's request waits on the
// client: its answer comes in on the connection.
func (c *stdioConn) passReading(ctx context.Context) {
	if r, ok := c.core.Out(ctx).(*request); ok && r.baton != nil && r.baton.pass() {
		go c.read()
	}
}

// handle runs mcp-go's HandleMessage; a panic becomes an internal error
// for the request instead of ending the process.
func (c *stdioConn) handle(ctx context.Context, msg json.RawMessage) (resp mcp.JSONRPCMessage) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("mcp.stdio.panic", "panic", r)
			if env, err := edge.ParseEnvelope(msg); err == nil && len(env.ID) > 0 {
				resp = internalError(msg, r)
			}
		}
	}()
	return c.mcp.HandleMessage(ctx, msg)
}

// sawModern reports whether env is a 2026-07-28 request, whose era needs
// no initialize; a request without _meta is of the 2025 era even on a
// connection that spoke 2026-07-28 before.
func (c *stdioConn) sawModern(env *edge.Envelope) bool {
	if env.Modern() {
		c.modern.Store(true)
		return true
	}
	return false
}

// bigIDAnswer serves a request whose integer id mcp-go would round: the
// id travels as a string through mcp-go and the response carries the
// original digits (mcpgofix/floatid.go).
func (c *stdioConn) bigIDAnswer(ctx context.Context, env edge.Envelope, line []byte) mcp.JSONRPCMessage {
	msg, _, err := mcpgofix.BigID(line, env.ID)
	if err != nil {
		return parseErrorAnswer()
	}
	resp := c.handle(ctx, msg)
	if resp == nil {
		return nil
	}
	b, err := json.Marshal(resp)
	if err == nil {
		b, err = mcpgofix.WithID(b, env.ID)
	}
	if err != nil {
		return rpcError(nil, mcp.INTERNAL_ERROR, "encoding the response: "+err.Error())
	}
	return json.RawMessage(b)
}

// rpcError is mcpgofix.RPCError: the raw id is echoed byte for byte.
func rpcError(rawID json.RawMessage, code int, message string) mcp.JSONRPCError {
	return edge.RPCError(rawID, code, message)
}

// internalError answers the request in msg after a panic.
func internalError(msg []byte, r any) mcp.JSONRPCMessage {
	env, _ := edge.ParseEnvelope(msg)
	return rpcError(env.ID, mcp.INTERNAL_ERROR, fmt.Sprintf("internal panic: %v", r))
}

// reply hands a response to the request waiting for it. A response no
// request waits for (a late answer after a timeout) is dropped.
func (c *stdioConn) reply(env edge.Envelope) {
	id, err := strconv.ParseInt(string(env.ID), 10, 64)
	if err != nil {
		c.log.Debug("mcp.stdio.response.unknown", "id", string(env.ID))
		return
	}
	c.pendMu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.pendMu.Unlock()
	if !ok {
		c.log.Debug("mcp.stdio.response.unknown", "id", id)
		return
	}
	ch <- rpcReply{result: env.Result, err: env.Error}
}

// writeMessage encodes msg as one line (as json.Marshal would, newline
// added) and writes it with a single write. The encoder hands its whole
// buffer to one Write, so the line goes to write without another copy: a
// 40 MiB result is held once by encoding/json, not again in a buffer of
// ours (TestServeLargeResultRSS).
func (c *stdioConn) writeMessage(msg any) {
	if err := json.NewEncoder(lineWriter{c}).Encode(msg); err != nil {
		c.log.Error("mcp.stdio.encode", "error", err)
	}
}

// lineWriter passes a whole encoded message to write.
type lineWriter struct{ c *stdioConn }

func (w lineWriter) Write(line []byte) (int, error) {
	w.c.write(line)
	return len(line), nil
}

// write writes line to out, or queues a copy of it while another write is
// in progress; whoever writes then writes everything queued, in order,
// until the queue is empty, and the others return at once. Under
// concurrent calls several responses thus share one write(2), and order
// is kept: a tool's notifications still precede its result. line is the
// caller's until write returns.
func (c *stdioConn) write(line []byte) {
	c.wmu.Lock()
	if c.writing {
		c.queued = append(c.queued, line...)
		c.wmu.Unlock()
		return
	}
	c.writing = true
	c.wmu.Unlock()
	c.writeOut(line) // nothing is queued while no write is in progress
	c.wmu.Lock()
	for len(c.queued) > 0 {
		buf := c.queued
		c.queued = c.spare[:0]
		c.wmu.Unlock()
		c.writeOut(buf)
		c.wmu.Lock()
		if cap(buf) <= 1<<20 {
			c.spare = buf[:0]
		} else {
			c.spare = nil // a huge result's buffer is not kept
		}
	}
	c.writing = false
	c.wmu.Unlock()
}

func (c *stdioConn) writeOut(b []byte) {
	if _, err := c.out.Write(b); err != nil {
		c.log.Debug("mcp.stdio.write", "error", err)
	}
}

// pump writes the notifications mcp-go queues for this client (resource
// updates, list changes); a tool's own notifications are written directly
// by its peer (see notify).
func (c *stdioConn) pump(ctx context.Context) {
	for {
		select {
		case n := <-c.notes:
			c.writeMessage(n)
		case <-ctx.Done():
			return
		}
	}
}

// progress writes a tool's progress now, so it reaches the client before
// the result of the call that sent it; nothing waits for it.
func (c *stdioConn) Progress(_ context.Context, params map[string]any) bool {
	if c.Initialized() {
		c.notify("notifications/progress", params)
	}
	return false
}

// log writes a tool's log message now, in the shape of mcp-go's own, when
// the client's level wants it.
func (c *stdioConn) Log(ctx context.Context, n mcp.LoggingMessageNotification) bool {
	if c.Initialized() && mcpgofix.LogWanted(ctx, n.Params.Level) {
		c.notify(n.Method, map[string]any{"level": n.Params.Level, "logger": n.Params.Logger, "data": n.Params.Data})
	}
	return false
}

// WaitWritten does not wait: Progress and Log wrote before returning.
func (c *stdioConn) WaitWritten(context.Context, int) {}

// BeforeRequest: the server's requests share the one pipe.
func (c *stdioConn) BeforeRequest(context.Context) error { return nil }

// AnsweredInitialize records the answered initialize: other requests may run.
func (c *stdioConn) AnsweredInitialize() { c.handshook.Store(true) }

// Drop: a notification's context has no answer to drop.
func (c *stdioConn) Drop() {}

// CloseStream: a pipe has no stream to close while a call goes on.
func (c *stdioConn) CloseStream(context.Context) bool { return false }

// request is one request read from the connection: the connection's
// Outbound, with the request's own answer and reading role.
type request struct {
	*stdioConn
	baton   *baton      // set while the request runs on the reading goroutine
	dropped atomic.Bool // its answer is not sent (Drop)
}

// Drop keeps the request's answer from being written.
func (r *request) Drop() { r.dropped.Store(true) }

// notify writes a notification now, so it reaches the client before the
// result of the call that sent it.
func (c *stdioConn) notify(method string, params map[string]any) {
	c.writeMessage(mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}},
	})
}

// request sends the client a request and waits for its result.
func (c *stdioConn) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c.passReading(ctx)
	id := c.nextID.Add(1)
	ch := make(chan rpcReply, 1)
	c.pendMu.Lock()
	c.pending[id] = ch
	c.pendMu.Unlock()
	defer func() {
		c.pendMu.Lock()
		delete(c.pending, id)
		c.pendMu.Unlock()
	}()
	msg := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{mcp.JSONRPC_VERSION, id, method, params}
	c.writeMessage(msg)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.inputEnded:
		return nil, fmt.Errorf("%s request failed: %w", method, errInputEnded)
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%s request failed: %s", method, r.err.Message)
		}
		return r.result, nil
	}
}

// errInputEnded fails a request to a client that closed its input.
var errInputEnded = errors.New("the client closed its input, so no answer can come")

// mcp-go's ClientSession and its optional interfaces.

func (c *stdioConn) SessionID() string { return c.id }

func (c *stdioConn) NotificationChannel() chan<- mcp.JSONRPCNotification { return c.notes }

func (c *stdioConn) Initialize() {
	if c.level.Load() == nil {
		c.level.Store(mcp.LoggingLevelError)
	}
	c.initialized.Store(true)
}

func (c *stdioConn) Initialized() bool { return c.initialized.Load() }

func (c *stdioConn) SetLogLevel(level mcp.LoggingLevel) { c.level.Store(level) }

func (c *stdioConn) GetLogLevel() mcp.LoggingLevel {
	if l, ok := c.level.Load().(mcp.LoggingLevel); ok {
		return l
	}
	return mcp.LoggingLevelError
}

func (c *stdioConn) GetClientInfo() mcp.Implementation {
	c.infoMu.RLock()
	defer c.infoMu.RUnlock()
	return c.info
}

func (c *stdioConn) SetClientInfo(info mcp.Implementation) {
	c.infoMu.Lock()
	c.info = info
	c.infoMu.Unlock()
}

func (c *stdioConn) GetClientCapabilities() mcp.ClientCapabilities {
	c.infoMu.RLock()
	defer c.infoMu.RUnlock()
	return c.caps
}

func (c *stdioConn) SetClientCapabilities(caps mcp.ClientCapabilities) {
	c.infoMu.Lock()
	c.caps = caps
	c.infoMu.Unlock()
}

// ProtocolVersion is the version negotiated by initialize.
func (c *stdioConn) ProtocolVersion() string {
	c.infoMu.RLock()
	defer c.infoMu.RUnlock()
	return c.version
}

// SetProtocolVersion records the version initialize negotiated.
func (c *stdioConn) SetProtocolVersion(v string) {
	c.infoMu.Lock()
	c.version = v
	c.infoMu.Unlock()
}

func (c *stdioConn) RequestSampling(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	raw, err := c.request(ctx, string(mcp.MethodSamplingCreateMessage), req.CreateMessageParams)
	if err != nil {
		return nil, err
	}
	var res mcp.CreateMessageResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("sampling response: %w", err)
	}
	content, err := mcp.ParseSamplingContent(res.Content)
	if err != nil {
		return nil, fmt.Errorf("sampling response content: %w", err)
	}
	res.Content = content
	return &res, nil
}

func (c *stdioConn) RequestElicitation(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	raw, err := c.request(ctx, string(mcp.MethodElicitationCreate), req.Params)
	if err != nil {
		return nil, err
	}
	var res mcp.ElicitationResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("elicitation response: %w", err)
	}
	return &res, nil
}

func (c *stdioConn) ListRoots(ctx context.Context, _ mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	raw, err := c.request(ctx, string(mcp.MethodListRoots), nil)
	if err != nil {
		return nil, err
	}
	var res mcp.ListRootsResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("roots response: %w", err)
	}
	return &res, nil
}

var (
	_ edge.Outbound                     = (*stdioConn)(nil)
	_ edge.Outbound                     = (*request)(nil)
	_ server.SessionWithLogging         = (*stdioConn)(nil)
	_ server.SessionWithClientInfo      = (*stdioConn)(nil)
	_ server.SessionWithSampling        = (*stdioConn)(nil)
	_ server.SessionWithElicitation     = (*stdioConn)(nil)
	_ server.SessionWithRoots           = (*stdioConn)(nil)
	_ server.SessionWithProtocolVersion = (*stdioConn)(nil)
)
