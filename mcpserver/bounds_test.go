package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// started hears from test.block once it runs.
var started = make(chan struct{}, 16)

// boundsServer is a server with small limits and three tools: echo,
// block, which says it started and waits for release, and ask, which
// asks the client a question.
func boundsServer(t testing.TB, l mcpserver.Limits, release chan struct{}) *mcpserver.Server {
	t.Helper()
	for len(started) > 0 { // left by an earlier test's blocked calls
		<-started
	}
	reg := registry.New()
	reg.MustRegister(echoTool())
	reg.MustRegister(askTool())
	reg.MustRegister(registry.MustNewTool("test.block", "Block until released.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		started <- struct{}{}
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}))
	h := newHost(t, reg, "")
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Limits: l, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// stdioPeer drives a stdio server line by line.
type stdioPeer struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Reader
}

func startStdio(t *testing.T, srv *mcpserver.Server) *stdioPeer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := servePiped(ctx, srv, time.Second)
	t.Cleanup(func() {
		// Answers the test did not wait for must not block the server's
		// writes, or it would never end.
		go io.Copy(io.Discard, p.out)
		cancel()
		p.in.Close()
		<-p.served
	})
	return &stdioPeer{t: t, in: p.in, out: bufio.NewReaderSize(p.out, 1<<20)}
}

// send writes line; the pipe holds nothing, so a server that stopped
// reading fails the test here.
func (p *stdioPeer) send(line string) {
	p.t.Helper()
	errc := make(chan error, 1)
	go func() { _, err := io.WriteString(p.in, line+"\n"); errc <- err }()
	select {
	case err := <-errc:
		if err != nil {
			p.t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		p.t.Fatal("the server did not read a line within 10 s")
	}
}

func (p *stdioPeer) recv() map[string]any {
	p.t.Helper()
	type read struct {
		line string
		err  error
	}
	ch := make(chan read, 1)
	go func() { l, err := p.out.ReadString('\n'); ch <- read{l, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			p.t.Fatalf("reading the server: %v", r.err)
		}
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(r.line))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			p.t.Fatalf("server sent %q: %v", r.line, err)
		}
		delete(m, "jsonrpc")
		return m
	case <-time.After(10 * time.Second):
		p.t.Fatal("no answer from the server within 10 s")
		return nil
	}
}

const initLine = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func callLine(id, tool, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

func errorOf(m map[string]any) (code, message string) {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return "", ""
	}
	return string(e["code"].(json.Number)), e["message"].(string)
}

func TestStdioBounds(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	p := startStdio(t, boundsServer(t, mcpserver.Limits{MaxMessageBytes: 4096, MaxConcurrentPerClient: 1}, release))

	// Before initialize (2025) nothing runs.
	p.send(callLine("1", "test_echo", `{"message":"early"}`))
	if code, msg := errorOf(p.recv()); code != "-32600" || !strings.Contains(msg, "not initialized") {
		t.Errorf("tools/call before initialize = %s %q; want -32600 not initialized", code, msg)
	}
	// A 2026-07-28 request needs no initialize; a request without _meta
	// after it is of the 2025 era, and still refused.
	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + modernMeta + `}}`)
	if m := p.recv(); m["result"] == nil {
		t.Errorf("2026-07-28 tools/list before initialize = %v; want a result", m)
	}
	p.send(callLine("3", "test_echo", `{"message":"early"}`))
	if code, msg := errorOf(p.recv()); code != "-32600" || !strings.Contains(msg, "not initialized") {
		t.Errorf("tools/call without _meta after a 2026-07-28 request = %s %q; want -32600 not initialized", code, msg)
	}
	p.send(callLine("12345678901234567890124", "test_echo", `{"message":"early"}`))
	if m := p.recv(); m["id"] != json.Number("12345678901234567890124") {
		t.Errorf("refusal before initialize = %v; want the big id echoed exactly", m)
	}
	p.send(initLine)
	if m := p.recv(); m["result"] == nil {
		t.Fatalf("initialize = %v", m)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	// Ids are strings or integers; big integers come back digit for digit.
	for _, id := range []string{`{"a":1}`, `true`, `1.5`, `[1]`, `null`} {
		p.send(callLine(id, "test_echo", `{"message":"x"}`))
		m := p.recv()
		if code, _ := errorOf(m); code != "-32600" || m["id"] != nil {
			t.Errorf("id %s: answer %v; want -32600 with id null", id, m)
		}
	}
	// A batch (removed in 2025-06-18) is refused as such, not as bad JSON.
	p.send(` [{"jsonrpc":"2.0","id":5,"method":"ping"}]`)
	if code, msg := errorOf(p.recv()); code != "-32600" || !strings.Contains(msg, "batches are not supported") {
		t.Errorf("batch = %s %q; want -32600 batches are not supported", code, msg)
	}
	p.send(callLine("12345678901234567890123", "test_echo", `{"message":"big"}`))
	if m := p.recv(); m["id"] != json.Number("12345678901234567890123") || m["result"] == nil {
		t.Errorf("big id answer = %v; want the id echoed exactly", m)
	}
	p.send(callLine("9007199254740993", "test_echo", `{"message":"2^53+1"}`))
	if m := p.recv(); m["id"] != json.Number("9007199254740993") {
		t.Errorf("2^53+1 id answer = %v", m)
	}

	// An oversized line is refused and the connection keeps serving.
	p.send(callLine("2", "test_echo", `{"message":"`+strings.Repeat("x", 10000)+`"}`))
	if code, msg := errorOf(p.recv()); code != "-32600" || !strings.Contains(msg, "max_message_bytes") {
		t.Errorf("oversized line = %s %q; want -32600 naming max_message_bytes", code, msg)
	}
	p.send(callLine("3", "test_echo", `{"message":"after"}`))
	if m := p.recv(); m["id"] != json.Number("3") || m["result"] == nil {
		t.Errorf("call after the oversized line = %v", m)
	}

	// Beyond the per-client bound and as many waiting, a request is
	// refused instead of queued.
	p.send(callLine("4", "test_block", `{}`))
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatalf("test_block did not start; the server said %v", p.recv())
	}
	p.send(callLine("6", "test_block", `{}`)) // waits for the running one
	p.send(callLine("5", "test_echo", `{"message":"busy?"}`))
	if m := p.recv(); m["id"] != json.Number("5") || !strings.Contains(func() string { _, s := errorOf(m); return s }(), "server busy") {
		t.Errorf("second call beyond max_concurrent_per_client = %v; want server busy", m)
	}
}

// TestStdioPipelinedHandshake sends the handshake and the first requests
// in one write, as a script piping lines into bub-mcp serve does: the
// requests after initialize were refused as "not initialized" while
// initialize still ran on another goroutine. Each is now served, and
// initialize is answered first.
func TestStdioPipelinedHandshake(t *testing.T) {
	p := startStdio(t, boundsServer(t, mcpserver.Limits{}, nil))
	p.send(strings.Join([]string{
		initLine,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		callLine("2", "test_echo", `{"message":"piped"}`),
	}, "\n"))
	first := p.recv()
	if first["id"] != json.Number("0") || first["result"] == nil {
		t.Fatalf("first answer = %v; want initialize's result", first)
	}
	got := map[string]string{}
	for range 2 {
		m := p.recv()
		id, _ := m["id"].(json.Number)
		if code, msg := errorOf(m); code != "" {
			got[string(id)] = "error " + code + ": " + msg
			continue
		}
		res, _ := m["result"].(map[string]any)
		switch id {
		case "1":
			tools, _ := res["tools"].([]any)
			got["1"] = fmt.Sprintf("%d tools", len(tools))
		case "2":
			content, _ := res["content"].([]any)
			text, _ := content[0].(map[string]any)["text"].(string)
			got["2"] = text
		}
	}
	want := map[string]string{"1": "3 tools", "2": "piped"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers after a pipelined initialize (-want +got):\n%s", diff)
	}
}

func TestHTTPBounds(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := boundsServer(t, mcpserver.Limits{MaxMessageBytes: 4096, ReadTimeout: 300 * time.Millisecond}, release)
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	defer func() { closeSessions(context.Background()); ts.Close() }()
	post := func(body io.Reader, contentLength int64) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", body)
		req.ContentLength = contentLength
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	big := initLine[:len(initLine)-1] + `,"pad":"` + strings.Repeat("x", 5000) + `"}`
	tests := []struct {
		name       string
		body       io.Reader
		length     int64
		wantStatus int
		wantBody   string
	}{
		{"declared too large", strings.NewReader(big), int64(len(big)), http.StatusRequestEntityTooLarge, "max_message_bytes"},
		{"chunked too large", io.MultiReader(strings.NewReader(big)), -1, http.StatusRequestEntityTooLarge, "max_message_bytes"},
		{"within the limit", strings.NewReader(initLine), int64(len(initLine)), http.StatusOK, `"protocolVersion"`},
	}
	for _, tt := range tests {
		status, body := post(tt.body, tt.length)
		if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
			t.Errorf("%s: %d %.100q; want %d containing %q", tt.name, status, body, tt.wantStatus, tt.wantBody)
		}
	}

	// A stalled body is cut after the read timeout.
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\"")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("stalled body: status %d; want 400", resp.StatusCode)
		}
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("stalled body still open after %v", time.Since(start))
	}
}

func TestHTTPConcurrencyBound(t *testing.T) {
	release := make(chan struct{})
	srv := boundsServer(t, mcpserver.Limits{MaxConcurrentRequests: 1}, release)
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	defer func() { close(release); closeSessions(context.Background()); ts.Close() }()
	modernCall := func(tool string) *http.Request {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
		return req
	}
	first := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(modernCall("test_block"))
		if err != nil {
			first <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-started // the blocking call holds the only slot
	resp, err := http.DefaultClient.Do(modernCall("test_echo"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	got := []int{resp.StatusCode}
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if len(got) == 0 || got[len(got)-1] != http.StatusServiceUnavailable {
		t.Fatalf("statuses while one call holds the only slot: %v; want a 503", got)
	}
	release <- struct{}{}
	if diff := cmp.Diff(http.StatusOK, <-first); diff != "" {
		t.Errorf("blocked call status (-want +got):\n%s", diff)
	}
}

// TestHTTPSurface checks the answers that must come at once or not at all:
// a GET without a session, or with one that does not exist (never made, or
// ended) or an unsupported protocol version, a DELETE likewise, a method
// MCP does not use; the /p/<profile>/mcp form of a profile URL; and a
// resource the caller cannot read left out of resources/list.
func TestHTTPSurface(t *testing.T) {
	h := newHost(t, registry.New(), "[profiles.ro]\n")
	readable := mcpserver.TextResource("test://ok", "ok", "Readable.", "text/plain", func(ctx context.Context, conn *providers.Connection) (string, error) { return "ok", nil })
	broken := mcpserver.TextResource("test://broken", "broken", "Never readable.", "text/plain", func(ctx context.Context, conn *providers.Connection) (string, error) {
		return "", io.ErrUnexpectedEOF
	})
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Extensions: []mcpserver.Extension{readable, broken}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default", "ro"}})
	ts := httptest.NewServer(handler)
	defer func() { closeSessions(context.Background()); ts.Close() }()

	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(ts.URL + "/mcp")
	if err != nil {
		t.Fatalf("GET /mcp without a session: %v (it must answer at once)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /mcp without a session = %d; want 405", resp.StatusCode)
	}
	// A 2025 session, then GETs that name it, or another, or none valid.
	status, hdr, _ := post(t, ts.URL+"/mcp", nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := hdr.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", status, sid)
	}
	do := func(method, session, version string) int {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		req.Header.Set("Mcp-Protocol-Version", version)
		resp, err := client.Do(req) // returns once the headers are in
		if err != nil {
			t.Fatalf("%s with session %q, version %q: %v (it must answer at once)", method, session, version, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const unknown = "mcp-session-AAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, tc := range []struct {
		name, method, session, version string
		want                           int
	}{
		{"GET, its session", "GET", sid, "2025-11-25", http.StatusOK},
		{"GET, unknown session", "GET", unknown, "2025-11-25", http.StatusNotFound},
		{"GET, unsupported version", "GET", sid, "1999-01-01", http.StatusBadRequest},
		{"GET, malformed version", "GET", sid, "not-a-version", http.StatusBadRequest},
		{"DELETE, no session", "DELETE", "", "2025-11-25", http.StatusBadRequest},
		{"DELETE, unknown session", "DELETE", unknown, "2025-11-25", http.StatusNotFound},
		{"DELETE, malformed version", "DELETE", sid, "not-a-version", http.StatusBadRequest},
		{"PUT", "PUT", sid, "2025-11-25", http.StatusMethodNotAllowed},
		{"DELETE, its session", "DELETE", sid, "2025-11-25", http.StatusOK},
		{"GET, ended session", "GET", sid, "2025-11-25", http.StatusNotFound},
		{"DELETE, ended session", "DELETE", sid, "2025-11-25", http.StatusNotFound},
	} {
		if got := do(tc.method, tc.session, tc.version); got != tc.want {
			t.Errorf("%s: %d; want %d", tc.name, got, tc.want)
		}
	}
	if status, _, _ := post(t, ts.URL+"/mcp", map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); status != http.StatusNotFound {
		t.Errorf("POST after DELETE: %d; want 404", status)
	}
	// No session named at all is the client's mistake, not an expired
	// session: 400, which does not tell the client to initialize again
	// (mcpgofix/missingsession.go).
	if status, _, _ := post(t, ts.URL+"/mcp", map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); status != http.StatusBadRequest {
		t.Errorf("POST without Mcp-Session-Id: %d; want 400", status)
	}

	for _, path := range []string{"/p/ro/mcp", "/mcp/p/ro"} {
		c := connect(t, ts.URL+path, modern, nil)
		res, err := c.ListResources(t.Context(), mcp.ListResourcesRequest{})
		if err != nil {
			t.Fatalf("%s: resources/list: %v", path, err)
		}
		var uris []string
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		if diff := cmp.Diff([]string{"test://ok"}, uris); diff != "" {
			t.Errorf("%s: listed resources (-want +got):\n%s", path, diff)
		}
	}
}

// TestCancelOnlyByTheCaller checks that on the sessionless wire a
// notifications/cancelled sent on another request (here by another
// client, under the same anonymous identity) cannot cancel a call.
func TestCancelOnlyByTheCaller(t *testing.T) {
	release := make(chan struct{})
	srv := boundsServer(t, mcpserver.Limits{}, release)
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	defer func() { closeSessions(context.Background()); ts.Close() }()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	post := func(method, name, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	done := make(chan string, 1)
	go func() {
		_, body := post("tools/call", "test_block", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_block","arguments":{},`+meta+`}}`)
		done <- body
	}()
	<-started
	if status, body := post("notifications/cancelled", "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"not yours",`+meta+`}}`); status >= 300 {
		t.Logf("cancel from another request answered %d %s", status, body)
	}
	close(release)
	if body := <-done; !strings.Contains(body, "released") {
		t.Errorf("the call was cancelled by another request: %s", body)
	}
}

// TestHTTPRequestIDs: over HTTP, as on stdio, ids are strings or integers
// (else -32600 with id null, and nothing runs), and integers mcp-go would
// round through float64 come back digit for digit, on both eras, in
// results and errors. Without checkID mcp-go answers {"a":1} and echoes
// 9007199254740993 as 9007199254740992; without the answer the writer
// holds (finish), its refusals before dispatch echo
// 1.2345678901234568e+22.
func TestHTTPRequestIDs(t *testing.T) {
	srv := boundsServer(t, mcpserver.Limits{}, nil)
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	defer func() { closeSessions(context.Background()); ts.Close() }()

	status, header, _ := post(t, ts.URL+"/mcp", nil, initLine)
	if status != http.StatusOK || header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: HTTP %d, session %q", status, header.Get("Mcp-Session-Id"))
	}
	wires := []struct {
		name   string
		header map[string]string
		meta   string
	}{
		{"2025-11-25 session", map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": header.Get("Mcp-Session-Id")}, ""},
		{"2026-07-28", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "test_echo"}, "," + modernMeta},
	}
	// Refused before any hook runs (mcp-go checks a 2026 header against a
	// body without its _meta, and the "jsonrpc" member, first): the error
	// still carries the id exactly, or null.
	early := []struct {
		header map[string]string
		body   string
	}{
		{map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, `{"jsonrpc":"2.0","id":%s,"method":"tools/list"}`},
		{wires[0].header, `{"id":%s,"method":"ping"}`},
	}
	for _, e := range early {
		for id, want := range map[string]any{`{"a":1}`: nil, "12345678901234567890123": json.Number("12345678901234567890123"), `"s"`: "s", "1234567890123456": json.Number("1234567890123456")} {
			_, _, m := post(t, ts.URL+"/mcp", e.header, fmt.Sprintf(e.body, id))
			if code, _ := errorOf(m); code == "" || m["id"] != want {
				t.Errorf("%s, id %s: %v; want an error with id %v", e.body, id, m, want)
			}
		}
	}
	for _, wire := range wires {
		for _, id := range []string{`{"a":1}`, `true`, `1.5`, `[1]`, `1e300`, `null`} {
			status, _, m := post(t, ts.URL+"/mcp", wire.header, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"test_echo","arguments":{"message":"x"}`+wire.meta+`}}`)
			if code, _ := errorOf(m); status != http.StatusBadRequest || code != "-32600" || m["id"] != nil {
				t.Errorf("%s, id %s: HTTP %d %v; want 400, -32600 with id null", wire.name, id, status, m)
			}
		}
		status, _, m := post(t, ts.URL+"/mcp", wire.header, `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_echo","arguments":{"message":"x"}`+wire.meta+`}}]`)
		if code, msg := errorOf(m); status != http.StatusBadRequest || code != "-32600" || !strings.Contains(msg, "batches are not supported") {
			t.Errorf("%s, a batch: HTTP %d %v; want 400, -32600 batches are not supported", wire.name, status, m)
		}
		for _, id := range []string{"9007199254740993", "12345678901234567890123", "-9007199254740993", "9007199254740991", `"s"`} {
			_, _, m := post(t, ts.URL+"/mcp", wire.header, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"test_echo","arguments":{"message":"exact"}`+wire.meta+`}}`)
			want := any(json.Number(id))
			if strings.HasPrefix(id, `"`) {
				want = strings.Trim(id, `"`)
			}
			res, _ := m["result"].(map[string]any)
			if m["id"] != want || res == nil || !strings.Contains(fmt.Sprint(res["content"]), "exact") {
				t.Errorf("%s, id %s: %v; want the echo result with the id as sent", wire.name, id, m)
			}
		}
	}
}

// TestCancelledCallGetsNoAnswer: in a 2025 HTTP session, a call the
// client cancels with notifications/cancelled (sent on another POST of
// its session) ends without a JSON-RPC answer: its POST ends 204 No
// Content. The cancellation reaches the tool, which returns.
func TestCancelledCallGetsNoAnswer(t *testing.T) {
	srv := boundsServer(t, mcpserver.Limits{}, nil)
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	defer func() { closeSessions(context.Background()); ts.Close() }()
	url := ts.URL + "/mcp"
	status, header, _ := post(t, url, nil, initLine)
	session := map[string]string{"Mcp-Session-Id": header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	if status != http.StatusOK || session["Mcp-Session-Id"] == "" {
		t.Fatalf("initialize = %d (session %q)", status, session["Mcp-Session-Id"])
	}
	post(t, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	type answer struct {
		Status int
		Body   map[string]any
	}
	done := make(chan answer, 1)
	go func() {
		status, _, body := post(t, url, session, callLine("7", "test_block", `{}`))
		done <- answer{status, body}
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("test_block did not start")
	}
	if status, _, body := post(t, url, session, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"changed my mind"}}`); status != http.StatusAccepted {
		t.Errorf("notifications/cancelled = %d %v; want 202", status, body)
	}
	select {
	case a := <-done:
		if diff := cmp.Diff(answer{Status: http.StatusNoContent}, a); diff != "" {
			t.Errorf("the cancelled call's POST (-want +got):\n%s", diff)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not end")
	}
}
