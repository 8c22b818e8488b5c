// Package stdioclient is the client side of MCP's stdio transport, over
// pipes someone else opened (an upstream server spawned through an
// Environment), for mcp-go's client.Client.
//
// It exists for memory. mcp-go's own stdio transport (v1.2.1,
// client/transport/stdio.go, readResponses) copies each incoming line
// about five times before a result reaches its caller: bufio's
// ReadString (fragments, then one more copy into the string), then
// []byte(line) for each of up to three json.Unmarshal passes (an
// envelope probe, a request probe, the response), then the result as a
// json.RawMessage copied out of that. A 40 MB tool result cost some 200
// MB on its way in, and that cannot be fixed from outside its loop (the
// reader it is given sees bytes, not lines). mcp-go has no issue about
// it (its stdio reader's history is about lines too long for a Scanner:
// mark3labs/mcp-go#462, #588, #603).
//
// Here a line is read once into one []byte of its exact size (bounded by
// MaxMessageBytes), its envelope is decoded once, and a response's result
// is handed on as a slice of that buffer, not a copy of it. Everything
// else is what mcp-go's stdio transport does: requests from the server
// (sampling, elicitation, roots, ping) go to the request handler, each in
// its own goroutine; notifications go to the notification handler in the
// order they came; a line that is not JSON-RPC is skipped; at the end of
// the stream every pending request fails with transport.ErrTransportClosed.
package stdioclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ErrMessageTooLong ends the stream when a line passes MaxMessageBytes.
var ErrMessageTooLong = errors.New("message too long")

// Options are a transport's bounds and callbacks.
type Options struct {
	// MaxMessageBytes bounds one line (without its newline); a longer
	// one ends the transport as soon as it is seen, before it is read
	// whole. Zero means no bound.
	MaxMessageBytes int64
	// OnTooLong is told, once, how much of a line over MaxMessageBytes
	// had been read when it was refused: the owner restarts the server
	// with that as the reason.
	OnTooLong func(n int64)
	// Logger takes what cannot be said to a caller (an undecodable
	// line, a failed write of an answer); nil is slog.Default().
	Logger *slog.Logger
}

// Transport speaks JSON-RPC over a server's stdout (in) and stdin (out).
// It implements transport.Interface and transport.BidirectionalInterface.
type Transport struct {
	in   io.Reader
	out  io.WriteCloser
	opts Options
	log  *slog.Logger

	writeMu sync.Mutex // one line at a time on out

	mu      sync.Mutex
	pending map[string]chan *transport.JSONRPCResponse
	started bool
	ctx     context.Context // Start's: the server's requests are served in it

	done      chan struct{}
	doneOnce  sync.Once
	closeOnce sync.Once
	closeErr  error

	handlerMu      sync.RWMutex
	onNotification func(mcp.JSONRPCNotification)
	onRequest      transport.RequestHandler
}

var _ transport.BidirectionalInterface = (*Transport)(nil)

// New returns a transport reading the server's messages from in and
// writing ours to out. Nothing is read before Start.
func New(in io.Reader, out io.WriteCloser, opts Options) *Transport {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Transport{in: in, out: out, opts: opts, log: log,
		pending: map[string]chan *transport.JSONRPCResponse{}, done: make(chan struct{}), ctx: context.Background()}
}

// Start begins reading; later calls do nothing. ctx is kept for the
// server's requests (their handler's context), as mcp-go's transport
// does.
func (t *Transport) Start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		return nil
	}
	t.started, t.ctx = true, ctx
	go t.read()
	return nil
}

// Close ends the transport: pending requests fail with
// transport.ErrTransportClosed and the server's stdin is closed (its cue
// to exit). The read loop ends when the server's stdout does.
func (t *Transport) Close() error {
	t.finish()
	t.closeOnce.Do(func() {
		if err := t.out.Close(); err != nil {
			t.closeErr = fmt.Errorf("failed to close stdin: %w", err)
		}
	})
	return t.closeErr
}

func (t *Transport) finish() { t.doneOnce.Do(func() { close(t.done) }) }

// GetSessionId is empty: stdio has no sessions.
func (t *Transport) GetSessionId() string { return "" }

// SetNotificationHandler sets who is told the server's notifications;
// those before it are dropped.
func (t *Transport) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	t.handlerMu.Lock()
	t.onNotification = h
	t.handlerMu.Unlock()
}

// SetRequestHandler sets who answers the server's requests; without one
// they are answered "method not found".
func (t *Transport) SetRequestHandler(h transport.RequestHandler) {
	t.handlerMu.Lock()
	t.onRequest = h
	t.handlerMu.Unlock()
}

// SendRequest writes a request and waits for its response, ctx's end or
// the transport's.
func (t *Transport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	select {
	case <-t.done:
		return nil, transport.ErrTransportClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal request: %w", err)
	}
	key := req.ID.String()
	ch := make(chan *transport.JSONRPCResponse, 1)
	t.mu.Lock()
	t.pending[key] = ch
	t.mu.Unlock()
	forget := func() {
		t.mu.Lock()
		delete(t.pending, key)
		t.mu.Unlock()
	}
	if err := t.writeLine(b); err != nil {
		forget()
		return nil, fmt.Errorf("failed to write request: %w", err)
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-t.done:
		forget()
		select { // an answer delivered just before the stream ended
		case resp := <-ch:
			return resp, nil
		default:
		}
		return nil, transport.ErrTransportClosed
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

// SendNotification writes a notification.
func (t *Transport) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	select {
	case <-t.done:
		return transport.ErrTransportClosed
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("failed to marshal notification: %w", err)
	}
	if err := t.writeLine(b); err != nil {
		return fmt.Errorf("failed to write notification: %w", err)
	}
	return nil
}

// writeLine writes one message and its newline in one write, so that
// concurrent senders never interleave.
func (t *Transport) writeLine(b []byte) error {
	b = append(b, '\n')
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	_, err := t.out.Write(b)
	return err
}

// read dispatches the server's lines until its stdout ends (or passes
// the bound), then ends the transport.
func (t *Transport) read() {
	defer t.finish()
	lr := &lineReader{r: t.in, max: t.opts.MaxMessageBytes, buf: make([]byte, readSize)}
	for {
		line, err := lr.next()
		if err != nil {
			var tl *tooLongError
			switch {
			case errors.As(err, &tl):
				if t.opts.OnTooLong != nil {
					t.opts.OnTooLong(tl.n)
				}
			case err != io.EOF && !errors.Is(err, fs.ErrClosed) && !errors.Is(err, context.Canceled):
				t.log.Error("stdio: reading the server's output", "error", err)
			}
			return
		}
		select {
		case <-t.done:
			return
		default:
		}
		t.dispatch(line)
	}
}

// raw keeps a JSON value as a slice of the message it came in, where
// json.RawMessage would copy it: the line is never reused or changed, so
// the slice may outlive the decode.
type raw []byte

func (r *raw) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// envelope is every JSON-RPC message's fields at once: one decode tells a
// notification, a request and a response apart and has what each needs.
type envelope struct {
	JSONRPC string                   `json:"jsonrpc"`
	ID      *mcp.RequestId           `json:"id"`
	Method  string                   `json:"method"`
	Params  raw                      `json:"params"`
	Result  raw                      `json:"result"`
	Error   *mcp.JSONRPCErrorDetails `json:"error"`
}

// dispatch routes one line: a notification to the handler (in order), a
// request to the request handler, a response to its waiting caller.
func (t *Transport) dispatch(line []byte) {
	var m envelope
	if err := json.Unmarshal(line, &m); err != nil {
		t.log.Debug("stdio: skipped a line that is not JSON-RPC", "error", err, "bytes", len(line))
		return
	}
	switch {
	case m.Method != "" && m.ID == nil:
		n := mcp.JSONRPCNotification{JSONRPC: m.JSONRPC, Notification: mcp.Notification{Method: m.Method}}
		if len(m.Params) > 0 {
			if err := json.Unmarshal(m.Params, &n.Params); err != nil {
				t.log.Debug("stdio: skipped a notification", "method", m.Method, "error", err)
				return
			}
		}
		t.handlerMu.RLock()
		h := t.onNotification
		t.handlerMu.RUnlock()
		if h != nil {
			h(n)
		}
	case m.Method != "":
		req := transport.JSONRPCRequest{JSONRPC: m.JSONRPC, ID: *m.ID, Method: m.Method}
		if len(m.Params) > 0 {
			if err := json.Unmarshal(m.Params, &req.Params); err != nil {
				t.log.Debug("stdio: skipped a request", "method", m.Method, "error", err)
				return
			}
		}
		t.serve(req)
	default:
		resp := &transport.JSONRPCResponse{JSONRPC: m.JSONRPC, Error: m.Error}
		if m.ID != nil {
			resp.ID = *m.ID
		}
		if m.Result != nil {
			resp.Result = json.RawMessage(m.Result)
		}
		key := resp.ID.String()
		t.mu.Lock()
		ch, ok := t.pending[key]
		delete(t.pending, key)
		t.mu.Unlock()
		if ok {
			ch <- resp // buffered, and only this loop sends on it
		}
	}
}

// serve answers one of the server's requests off the read loop (the
// answer may need more messages from the server: a progress, a nested
// call's result).
func (t *Transport) serve(req transport.JSONRPCRequest) {
	t.handlerMu.RLock()
	h := t.onRequest
	t.handlerMu.RUnlock()
	if h == nil {
		t.answer(transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "No request handler configured", nil))
		return
	}
	t.mu.Lock()
	ctx := t.ctx
	t.mu.Unlock()
	go func() {
		if err := ctx.Err(); err != nil {
			t.answer(transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil))
			return
		}
		resp, err := h(ctx, req)
		switch {
		case err != nil:
			t.answer(transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil))
		case resp != nil:
			t.answer(resp)
		}
	}()
}

func (t *Transport) answer(resp *transport.JSONRPCResponse) {
	b, err := json.Marshal(resp)
	if err != nil {
		t.log.Error("stdio: encoding an answer", "error", err)
		return
	}
	if err := t.writeLine(b); err != nil {
		t.log.Debug("stdio: writing an answer", "error", err)
	}
}

// Reading lines: small reads into a fixed buffer; a line longer than it
// is gathered in chunks and joined once into a slice of its exact size,
// so a line of n bytes costs n (2n for the moment of the join), not the
// 5n of a string read and converted back for each decode.
const (
	readSize     = 64 << 10
	maxChunkSize = 1 << 20
)

// tooLongError is a line over the bound, with how much of it was read.
type tooLongError struct{ n int64 }

func (e *tooLongError) Error() string { return fmt.Sprintf("%v (%d bytes)", ErrMessageTooLong, e.n) }
func (e *tooLongError) Unwrap() error { return ErrMessageTooLong }

type lineReader struct {
	r      io.Reader
	max    int64
	buf    []byte
	lo, hi int // buf[lo:hi] is read and not yet returned
	err    error
}

// next returns the next line without its newline and trailing "\r"s, in
// a slice of its own. A last line without a newline is dropped, as
// bufio's ReadString reports it with the stream's error.
func (l *lineReader) next() ([]byte, error) {
	var chunks [][]byte
	var total int64
	for {
		if i := bytes.IndexByte(l.buf[l.lo:l.hi], '\n'); i >= 0 {
			tail := l.buf[l.lo : l.lo+i]
			l.lo += i + 1
			if l.max > 0 && total+int64(len(tail)) > l.max {
				return nil, &tooLongError{n: total + int64(len(tail))}
			}
			return join(chunks, total, tail), nil
		}
		part := l.buf[l.lo:l.hi]
		if l.max > 0 && total+int64(len(part)) > l.max {
			return nil, &tooLongError{n: total + int64(len(part))}
		}
		chunks = gather(chunks, part)
		total += int64(len(part))
		l.lo, l.hi = 0, 0
		if l.err != nil {
			return nil, l.err
		}
		l.hi, l.err = l.r.Read(l.buf)
	}
}

// gather appends p to the chunks, filling the last one before making a
// new one, twice the size of the last up to maxChunkSize.
func gather(chunks [][]byte, p []byte) [][]byte {
	for len(p) > 0 {
		if k := len(chunks); k > 0 && len(chunks[k-1]) < cap(chunks[k-1]) {
			c := chunks[k-1]
			n := min(cap(c)-len(c), len(p))
			chunks[k-1] = append(c, p[:n]...)
			p = p[n:]
			continue
		}
		size := readSize
		if k := len(chunks); k > 0 {
			size = min(2*cap(chunks[k-1]), maxChunkSize)
		}
		chunks = append(chunks, make([]byte, 0, size))
	}
	return chunks
}

// join makes one slice of the chunks and the tail, trimmed of "\r".
func join(chunks [][]byte, total int64, tail []byte) []byte {
	line := make([]byte, 0, total+int64(len(tail)))
	for _, c := range chunks {
		line = append(line, c...)
	}
	line = append(line, tail...)
	return bytes.TrimRight(line, "\r")
}
