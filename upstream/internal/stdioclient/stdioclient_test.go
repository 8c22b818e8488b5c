package stdioclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Lines come out whole however the stream is cut, without "\r\n", and a
// line over the bound is refused with how much of it was read.
func TestLineReader(t *testing.T) {
	long := strings.Repeat("y", 3*readSize+17) // spans several reads and chunks
	tests := []struct {
		name    string
		in      string
		max     int64
		want    []string
		wantErr error
		wantN   int64
	}{
		{name: "lines", in: "a\nbc\n\nd\n", want: []string{"a", "bc", "", "d"}, wantErr: io.EOF},
		{name: "crlf", in: "a\r\nb\r\r\n", want: []string{"a", "b"}, wantErr: io.EOF},
		{name: "last line without newline is dropped", in: "a\nbc", want: []string{"a"}, wantErr: io.EOF},
		{name: "long line", in: "a\n" + long + "\nb\n", want: []string{"a", long, "b"}, wantErr: io.EOF},
		{name: "exactly the bound", in: "12345\n", max: 5, want: []string{"12345"}, wantErr: io.EOF},
		{name: "over the bound", in: "1\n123456\n", max: 5, want: []string{"1"}, wantErr: ErrMessageTooLong, wantN: 6},
		{name: "over the bound before its newline", in: "1\n" + long, max: 1000, want: []string{"1"}, wantErr: ErrMessageTooLong},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole": func(r io.Reader) io.Reader { return r },
		"bytes": iotest.OneByteReader,
		"half":  iotest.HalfReader,
	}
	for _, tt := range tests {
		for rname, wrap := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				l := &lineReader{r: wrap(strings.NewReader(tt.in)), max: tt.max, buf: make([]byte, readSize)}
				var got []string
				var err error
				for {
					var line []byte
					if line, err = l.next(); err != nil {
						break
					}
					got = append(got, string(line))
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("lines (-want +got):\n%s", diff)
				}
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("error %v; want %v", err, tt.wantErr)
				}
				var tl *tooLongError
				if errors.As(err, &tl) && (tl.n <= tt.max || (tt.wantN != 0 && tl.n != tt.wantN)) {
					t.Errorf("refused at %d bytes; want %d (over %d)", tl.n, tt.wantN, tt.max)
				}
			})
		}
	}
}

// server is the other end of a transport: what the client writes, line
// by line, and a pipe to send it lines.
type server struct {
	lines chan map[string]any
	w     *io.PipeWriter
}

func (s *server) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.w, line+"\n"); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func (s *server) recv(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-s.lines:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("the client sent nothing")
		return nil
	}
}

func newPair(t *testing.T, opts Options) (*Transport, *server) {
	t.Helper()
	inR, inW := io.Pipe()   // server → client
	outR, outW := io.Pipe() // client → server
	s := &server{lines: make(chan map[string]any, 16), w: inW}
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsable": sc.Text()}
			}
			s.lines <- m
		}
	}()
	tr := New(inR, outW, opts)
	if err := tr.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		inW.Close()
		tr.Close()
		outR.Close()
	})
	return tr, s
}

// Responses reach their callers by id, whatever the order; notifications
// reach the handler in order; lines that are not JSON-RPC are skipped.
func TestRouting(t *testing.T) {
	tr, s := newPair(t, Options{})
	var mu sync.Mutex
	var notes []string
	tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
		mu.Lock()
		notes = append(notes, n.Method+" "+n.Params.AdditionalFields["progressToken"].(string))
		mu.Unlock()
	})
	type answer struct {
		resp *transport.JSONRPCResponse
		err  error
	}
	ask := func(id string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			r, err := tr.SendRequest(t.Context(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: "tools/call"})
			ch <- answer{r, err}
		}()
		return ch
	}
	a := ask("a")
	s.recv(t)
	b := ask("b")
	s.recv(t)
	s.send(t, `not json`)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"1"}}`)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"2"}}`)
	s.send(t, `{"jsonrpc":"2.0","id":"b","result":{"x":"b"}}`)
	s.send(t, `{"jsonrpc":"2.0","id":"zzz","result":{}}`) // nobody waits for it
	s.send(t, `{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"bad"}}`)
	gb, ga := <-b, <-a
	if ga.err != nil || gb.err != nil {
		t.Fatalf("errors: %v, %v", ga.err, gb.err)
	}
	if diff := cmp.Diff(`{"x":"b"}`, string(gb.resp.Result)); diff != "" {
		t.Errorf("b's result (-want +got):\n%s", diff)
	}
	if ga.resp.Error == nil || ga.resp.Error.Message != "bad" || ga.resp.Result != nil {
		t.Errorf("a's answer: %+v; want the error", ga.resp)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"notifications/progress 1", "notifications/progress 2"}, notes); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
}

// The server's requests are answered by the handler (its result or its
// error), or "method not found" without one.
func TestServerRequests(t *testing.T) {
	tr, s := newPair(t, Options{})
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if got := s.recv(t); got["error"].(map[string]any)["code"] != float64(mcp.METHOD_NOT_FOUND) {
		t.Errorf("without a handler: %v; want method not found", got)
	}
	tr.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		if req.Method == "fail" {
			return nil, errors.New("no way")
		}
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{"echo":`+mustJSON(req.Params)+`}`)), nil
	})
	s.send(t, `{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"maxTokens":10}}`)
	want := map[string]any{"jsonrpc": "2.0", "id": "s1", "result": map[string]any{"echo": map[string]any{"maxTokens": float64(10)}}}
	if diff := cmp.Diff(want, s.recv(t)); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"fail"}`)
	got := s.recv(t)
	if e, _ := got["error"].(map[string]any); e == nil || e["message"] != "no way" || got["id"] != float64(2) {
		t.Errorf("failed handler: %v; want its error under id 2", got)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// When the stream ends (EOF, or a line over the bound), pending requests
// fail with ErrTransportClosed at once, and later ones too.
func TestEnd(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		wantOver int64
	}{
		{name: "eof"},
		{name: "too long", line: strings.Repeat("x", 2000), wantOver: 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			over := make(chan int64, 1)
			tr, s := newPair(t, Options{MaxMessageBytes: 1000, OnTooLong: func(n int64) { over <- n }})
			errc := make(chan error, 1)
			go func() {
				_, err := tr.SendRequest(t.Context(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(1), Method: "tools/call"})
				errc <- err
			}()
			s.recv(t)
			if tt.line != "" {
				go io.WriteString(s.w, tt.line) // refused before its newline
			} else {
				s.w.Close()
			}
			select {
			case err := <-errc:
				if !errors.Is(err, transport.ErrTransportClosed) {
					t.Errorf("pending request: %v; want ErrTransportClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the pending request never ended")
			}
			if tt.wantOver != 0 {
				if n := <-over; n <= 1000 || n > tt.wantOver {
					t.Errorf("refused at %d bytes; want over 1000, at most %d", n, tt.wantOver)
				}
			}
			if _, err := tr.SendRequest(t.Context(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(2), Method: "x"}); !errors.Is(err, transport.ErrTransportClosed) {
				t.Errorf("later request: %v; want ErrTransportClosed", err)
			}
		})
	}
}

// A request whose context ends returns at once, and its late answer is
// dropped.
func TestCancel(t *testing.T) {
	tr, s := newPair(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(7)), Method: "tools/call"})
		errc <- err
	}()
	s.recv(t)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v; want context.Canceled", err)
	}
	s.send(t, `{"jsonrpc":"2.0","id":7,"result":{}}`)
	s.send(t, `{"jsonrpc":"2.0","id":"after","result":{}}`)
	if err := tr.SendNotification(t.Context(), mcp.JSONRPCNotification{JSONRPC: "2.0", Notification: mcp.Notification{Method: "notifications/initialized"}}); err != nil {
		t.Fatalf("notification after it: %v", err)
	}
	if got := s.recv(t); got["method"] != "notifications/initialized" {
		t.Errorf("server got %v; want the notification", got)
	}
}

// A large result costs its size once: the line is read into one buffer
// (gathered in chunks, joined once) and the result is a slice of it.
// mcp-go's stdio transport allocated about 5× the line for the same.
func TestLargeResultAllocation(t *testing.T) {
	const size = 16 << 20
	tr, s := newPair(t, Options{})
	line := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", size) + `"}]}}`
	msg := []byte(line + "\n") // made before counting, and written as is
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	type answer struct {
		resp *transport.JSONRPCResponse
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		r, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(1)), Method: "tools/call"})
		ch <- answer{r, err}
	}()
	s.recv(t) // the request is pending: its answer is not dropped
	go s.w.Write(msg)
	a := <-ch
	runtime.ReadMemStats(&after)
	resp, err := a.resp, a.err
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Result) != len(line)-len(`{"jsonrpc":"2.0","id":1,"result":}`) {
		t.Fatalf("result of %d bytes", len(resp.Result))
	}
	// The pipe's other end, the test's writer and its reader run in this
	// process too, but allocate nothing of the line's size.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %.1f× the line", float64(alloc)/float64(len(line)))
	if alloc > uint64(2.5*float64(len(line))) {
		t.Errorf("allocated %d bytes for a line of %d; want at most 2.5× (chunks and the joined line)", alloc, len(line))
	}
}
