package mcpserver_test

// Wire fixtures: what a client sees of the MCP server today, exchange by
// exchange, in testdata/wire/*.txtar. They pin the behaviour of both
// transports (stdio, streamable HTTP) in both protocol eras (the 2025-11-25
// session protocol, the sessionless 2026-07-28 one) so a rewrite of this
// package provably changes nothing on the wire but what it means to.
//
// A fixture is a txtar archive, modelled on the go-sdk's conformance
// fixtures. Its comment (the text before the first section) describes it
// and names, on lines of their own, its transport and era:
//
//	transport: stdio | http
//	era: 2025-11-25 | 2026-07-28 | both
//
// The -- client -- section is what the client sends, in order; blank lines
// and lines starting with # are skipped.
//
//   - stdio: one message per line, sent verbatim (malformed ones too). After
//     a request the test waits for its response (a line that is no JSON
//     object waits for the id-null error), after a notification it does not.
//   - http: a request line "METHOD /path" (optionally "wait=1s": how long
//     to wait for the whole response; default 5s), then "Name: value"
//     header lines, then at most one body line, sent verbatim. A POST gets
//     Content-Type: application/json and Accept: application/json,
//     text/event-stream unless a header line overrides them (an empty value
//     deletes the header); "Host:" sets the request's Host. $SESSION in a
//     header is the last Mcp-Session-Id the server returned.
//
// The -- server -- section is what the server said, one record a line:
//
//   - stdio: every line the server wrote, in order.
//   - http: per request "HTTP <status> <content type>", then the response
//     headers but Date, Content-Length and Content-Type as "Name: value",
//     then the body: an application/json body as one line, each SSE event
//     as an "sse ..." line naming its non-data fields (if any) followed
//     by its data, any other body as "body: <line>" lines.
//   - "timeout: ..." where the server did not answer (or did not end its
//     response) within the wait.
//
// Lines that are JSON compare structurally (decoded, so key order and
// spacing do not matter), others as text. What legitimately varies is
// normalised first: session ids become $SESSION, the test server's
// host:port $HOST, server versions $VERSION.
//
// Other sections (-- note --) are kept as they are. To re-record every
// fixture from what the server says now:
//
//	go test ./mcpserver -run TestWire -wire.update

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

var (
	wireUpdate = flag.Bool("wire.update", false, "rewrite testdata/wire/*.txtar from what the server sends")
)

// wireWait is how long the test waits for a response unless told otherwise.
const wireWait = 5 * time.Second

func TestWire(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "wire", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/wire")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runWireFixture(t, file)
		})
	}
}

func runWireFixture(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ar := parseTxtar(string(data))
	transport, era := headerField(ar.comment, "transport"), headerField(ar.comment, "era")
	switch era {
	case "2025-11-25", "2026-07-28", "both":
	default:
		t.Fatalf("%s: era %q; want 2025-11-25, 2026-07-28 or both", file, era)
	}
	client, ok := ar.section("client")
	if !ok {
		t.Fatalf("%s: no -- client -- section", file)
	}
	srv := wireServer(t)
	var got []string
	switch transport {
	case "stdio":
		got = runWireStdio(t, srv, client)
	case "http":
		got = runWireHTTP(t, srv, client)
	default:
		t.Fatalf("%s: transport %q; want stdio or http", file, transport)
	}
	if *wireUpdate {
		ar.set("server", strings.Join(got, "\n")+"\n")
		if err := os.WriteFile(file, []byte(ar.format()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, _ := ar.section("server")
	if diff := cmp.Diff(wireRecords(t, want), wireRecords(t, strings.Join(got, "\n"))); diff != "" {
		t.Errorf("%s: the server's messages differ from -- server -- (-want +got):\n%s\n(re-record with -wire.update if the change is deliberate)", file, diff)
	}
}

// wireServer is the fixture server: an App over wireRegistry with the
// test.prompt module (instructions) and one text resource.
func wireServer(t *testing.T) *mcpserver.Server {
	t.Helper()
	cfg, err := config.Parse("test.toml", "[profiles.default]\n", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	reg := wireRegistry()
	h, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: reg, Modules: []string{"test.prompt"}, Home: t.TempDir(), Workspace: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	readme := mcpserver.TextResource("bub://wire/readme", "readme", "A test resource.", "text/plain", func(ctx context.Context, conn *providers.Connection) (string, error) {
		return "hello from " + conn.Transport + ", profile " + conn.Profile, nil
	})
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: reg, Extensions: []mcpserver.Extension{readme}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func wireRegistry() *registry.Registry {
	r := registry.New()
	r.MustRegister(registry.MustNewTool("test.echo", "Echo a message.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Message string `json:"message"`
	}) (string, error) {
		return "Echo: " + in.Message, nil
	}))
	r.MustRegister(registry.MustNewTool("test.fail", "Always fail.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		return "", registry.NewError(registry.KindNotFound, "thing missing not found", map[string]any{"thing": "missing"})
	}))
	r.MustRegister(registry.MustNewTool("orders.get", "Look up an order.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		OrderID string `json:"order_id"`
	}) (orderOut, error) {
		return orderOut{ID: in.OrderID, Status: "shipped"}, nil
	}, registry.WithRenderer(func(o orderOut) string { return "order " + o.ID + ": " + o.Status })))
	r.MustRegister(registry.MustNewTool("test.progress", "Report progress twice.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		for i := 1; i <= 2; i++ {
			tc.Progress(ctx, float64(i), 2, fmt.Sprintf("step %d", i))
		}
		return "done", nil
	}))
	r.MustRegister(registry.MustNewTool("test.log", "Log at info and at error.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		tc.Log(ctx, slog.LevelInfo, "wire", map[string]any{"msg": "hello"})
		tc.Log(ctx, slog.LevelError, "wire", "trouble")
		return "logged", nil
	}))
	return r
}

// runWireStdio sends client's lines to ServeStdio and returns what it wrote.
func runWireStdio(t *testing.T, srv *mcpserver.Server, client string) []string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := servePiped(ctx, srv, time.Second)
	inW, served := p.in, p.served
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(p.out)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var out []string
	for _, line := range clientLines(client) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("stdio write: %v", err)
		}
		id, ok := awaitedID(line)
		if !ok {
			continue
		}
		deadline := time.NewTimer(wireWait)
	wait:
		for {
			select {
			case l, open := <-lines:
				if !open {
					out = append(out, "timeout: output ended before the response to "+id)
					break wait
				}
				out = append(out, l)
				if answers(l, id) {
					break wait
				}
			case <-deadline.C:
				out = append(out, fmt.Sprintf("timeout: no response to %s within %s", id, wireWait))
				break wait
			}
		}
		deadline.Stop()
	}
	inW.Close() // the client goes away: the server returns
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(wireWait):
		t.Error("ServeStdio did not return after stdin closed")
	}
	p.outW.Close() // also when Serve did not return: the lines end

	for l := range lines {
		out = append(out, l)
	}
	return normaliseWire(out, nil)
}

// clientLines are the non-blank, non-comment lines of a client section.
func clientLines(s string) []string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimRight(line, "\r"); strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// awaitedID is the id (as compact JSON) of the response line must get: its
// own for a request, null for a line that is no JSON object; ok is false for
// notifications and responses.
func awaitedID(line string) (id string, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &m) != nil {
		return "null", true
	}
	raw, hasID := m["id"]
	if _, hasMethod := m["method"]; !hasMethod || !hasID || string(raw) == "null" {
		return "", false
	}
	return compactJSON(raw), true
}

// answers reports whether the server's line is the response with id.
func answers(line, id string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &m) != nil {
		return false
	}
	if _, isMessage := m["method"]; isMessage {
		return false
	}
	raw, ok := m["id"]
	if !ok {
		raw = json.RawMessage("null")
	}
	return compactJSON(raw) == id
}

func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// wireRequest is one HTTP request of a client section.
type wireRequest struct {
	method, path string
	wait         time.Duration
	header       [][2]string
	body         *string
}

var (
	requestLine = regexp.MustCompile(`^(GET|POST|DELETE|PUT|PATCH|OPTIONS|HEAD) (/\S*)(?: wait=(\S+))?$`)
	headerLine  = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*):(?: (.*))?$`)
)

func parseWireRequests(t *testing.T, client string) []*wireRequest {
	var out []*wireRequest
	for _, line := range clientLines(client) {
		if m := requestLine.FindStringSubmatch(line); m != nil {
			r := &wireRequest{method: m[1], path: m[2], wait: wireWait}
			if m[3] != "" {
				d, err := time.ParseDuration(m[3])
				if err != nil {
					t.Fatalf("request line %q: %v", line, err)
				}
				r.wait = d
			}
			out = append(out, r)
			continue
		}
		if len(out) == 0 {
			t.Fatalf("client line %q before any request line", line)
		}
		r := out[len(out)-1]
		if m := headerLine.FindStringSubmatch(line); m != nil && r.body == nil {
			r.header = append(r.header, [2]string{m[1], m[2]})
			continue
		}
		if r.body != nil {
			t.Fatalf("%s %s: a second body line %q", r.method, r.path, line)
		}
		r.body = &line
	}
	return out
}

// runWireHTTP sends client's requests to the HTTP handler and returns the
// responses as records.
func runWireHTTP(t *testing.T, srv *mcpserver.Server, client string) []string {
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}, CheckHosts: true})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wireWait)
		defer cancel()
		closeSessions(ctx)
		ts.Close()
	})
	hc := ts.Client()
	var out, sessions []string
	session := ""
	for _, wr := range parseWireRequests(t, client) {
		ctx, cancel := context.WithTimeout(context.Background(), wr.wait)
		var body io.Reader
		if wr.body != nil {
			body = strings.NewReader(*wr.body)
		}
		req, err := http.NewRequestWithContext(ctx, wr.method, ts.URL+wr.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if wr.method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		for _, kv := range wr.header {
			v := strings.ReplaceAll(kv[1], "$SESSION", session)
			switch {
			case strings.EqualFold(kv[0], "Host"):
				req.Host = v
			case v == "":
				req.Header.Del(kv[0])
			default:
				req.Header.Set(kv[0], v)
			}
		}
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				out = append(out, fmt.Sprintf("timeout: no response within %s", wr.wait))
				continue
			}
			t.Fatalf("%s %s: %v", wr.method, wr.path, err)
		}
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			session = sid
			sessions = append(sessions, sid)
		}
		out = append(out, renderResponse(t, resp, wr.wait)...)
		resp.Body.Close()
		cancel()
	}
	vary := [][2]string{{strings.TrimPrefix(ts.URL, "http://"), "$HOST"}}
	for _, sid := range sessions {
		vary = append(vary, [2]string{sid, "$SESSION"})
	}
	return normaliseWire(out, vary)
}

// renderResponse is resp as records: status line, headers, body.
func renderResponse(t *testing.T, resp *http.Response, wait time.Duration) []string {
	ct := resp.Header.Get("Content-Type")
	out := []string{strings.TrimSpace(fmt.Sprintf("HTTP %d %s", resp.StatusCode, ct))}
	var names []string
	for name := range resp.Header {
		switch name {
		case "Date", "Content-Length", "Content-Type":
		default:
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		for _, v := range resp.Header[name] {
			out = append(out, name+": "+v)
		}
	}
	timedOut := func(err error) bool {
		if err == nil || errors.Is(err, io.EOF) {
			return false
		}
		if errors.Is(err, context.DeadlineExceeded) {
			out = append(out, fmt.Sprintf("timeout: response still open after %s", wait))
			return true
		}
		t.Fatalf("reading the response: %v", err)
		return true
	}
	if strings.HasPrefix(ct, "text/event-stream") {
		out = append(out, readSSE(resp.Body, timedOut)...)
		return out
	}
	b, err := io.ReadAll(resp.Body)
	if timedOut(err) {
		return out
	}
	text := strings.TrimRight(string(b), "\n")
	switch {
	case text == "":
	case strings.HasPrefix(ct, "application/json"):
		out = append(out, compactJSON([]byte(text)))
	default:
		for line := range strings.SplitSeq(text, "\n") {
			out = append(out, "body: "+line)
		}
	}
	return out
}

// readSSE renders an event stream: per event an "sse" line with its fields
// other than data (when it has any), then its data.
func readSSE(r io.Reader, timedOut func(error) bool) []string {
	var out, fields, data []string
	flush := func() {
		if len(fields) > 0 {
			out = append(out, "sse "+strings.Join(fields, " "))
		}
		if len(data) > 0 {
			out = append(out, compactJSON([]byte(strings.Join(data, "\n"))))
		}
		fields, data = nil, nil
	}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if line == "" && err == nil {
			flush()
		}
		if line != "" {
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			if name == "data" {
				data = append(data, value)
			} else {
				fields = append(fields, name+"="+value)
			}
		}
		if err != nil {
			flush()
			timedOut(err)
			return out
		}
	}
}

// normaliseWire replaces what legitimately varies: each vary[i][0] (the
// server's host:port, session ids) by vary[i][1], and server versions.
func normaliseWire(lines []string, vary [][2]string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		for _, v := range vary {
			l = strings.ReplaceAll(l, v[0], v[1])
		}
		if v, ok := decodeWire(l); ok {
			l = encodeWire(normaliseValue(v))
		}
		out[i] = l
	}
	return out
}

func normaliseValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if info, ok := e.(map[string]any); ok && (k == "serverInfo" || k == "io.modelcontextprotocol/serverInfo") {
				if _, ok := info["version"]; ok {
					info["version"] = "$VERSION"
				}
			}
			v[k] = normaliseValue(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normaliseValue(e)
		}
	}
	return v
}

// decodeWire decodes a line that is one JSON object or array.
func decodeWire(line string) (any, bool) {
	if !strings.HasPrefix(line, "{") && !strings.HasPrefix(line, "[") {
		return nil, false
	}
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil, false
	}
	return v, true
}

func encodeWire(v any) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// wireRecords are a server section's lines, JSON ones decoded.
func wireRecords(t *testing.T, s string) []any {
	var out []any
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if v, ok := decodeWire(line); ok {
			out = append(out, v)
		} else {
			out = append(out, line)
		}
	}
	return out
}

// headerField is the value of a "name: value" line of a fixture's comment.
func headerField(comment, name string) string {
	for line := range strings.SplitSeq(comment, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// txtar: a comment, then sections each opened by a "-- name --" line.
type txtar struct {
	comment string
	files   []txtarFile
}

type txtarFile struct{ name, data string }

func parseTxtar(s string) *txtar {
	a := &txtar{}
	for line := range strings.Lines(s) {
		l := strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") && len(l) > 6 {
			a.files = append(a.files, txtarFile{name: strings.TrimSpace(l[3 : len(l)-3])})
		} else if n := len(a.files); n > 0 {
			a.files[n-1].data += line
		} else {
			a.comment += line
		}
	}
	return a
}

func (a *txtar) section(name string) (string, bool) {
	for _, f := range a.files {
		if f.name == name {
			return f.data, true
		}
	}
	return "", false
}

func (a *txtar) set(name, data string) {
	for i := range a.files {
		if a.files[i].name == name {
			a.files[i].data = data
			return
		}
	}
	a.files = append(a.files, txtarFile{name, data})
}

func (a *txtar) format() string {
	var b strings.Builder
	b.WriteString(a.comment)
	for _, f := range a.files {
		fmt.Fprintf(&b, "-- %s --\n%s", f.name, f.data)
		if f.data != "" && !strings.HasSuffix(f.data, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
