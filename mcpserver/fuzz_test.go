package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
)

// FuzzStdioLine sends one arbitrary line to a running stdio server, then a
// ping (server/discover on the 2026-07-28 wire). Whatever the line holds,
// the server stays up and answers the ping,
// and everything it writes is a JSON-RPC 2.0 message, one per line, whose
// id (if any) is a string, an integer or null.
func FuzzStdioLine(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `null`, `"x"`, `{"jsonrpc":"2.0"}`, `not json`, `{"jsonrpc":"2.0","id":`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"test_echo","arguments":{"message":"hi"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_echo","arguments":[1]}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":null}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"bub://codemode/stub"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","id":"srv-1","error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"test_echo","arguments":{"message":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","bub/state":7}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"test_echo","arguments":{},"requestState":"a.b","inputResponses":{"x":1}}}`,
		strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
		strings.Repeat("x", 5000), // over the limit
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Add(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"test_echo","arguments":{"message":"hi"},`+modernMeta+`}}`, true)
	f.Add(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"test_echo","arguments":{},"requestState":"a.b",`+modernMeta+`}}`, true)
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, line string, modern bool) {
		// One server for every input, a fresh client connection for each,
		// so a failing input reproduces alone. A 2025-11-25 client
		// initializes first; a 2026-07-28 one never does.
		p := startStdio(t, srv)
		probe := `{"jsonrpc":"2.0","id":"fuzz-ping","method":"server/discover","params":{` + modernMeta + `}}`
		if !modern {
			p.send(initLine)
			p.recv()
			probe = `{"jsonrpc":"2.0","id":"fuzz-ping","method":"ping"}`
		}
		// Read while writing: the pipe has no buffer, and the server may
		// answer the line before it reads the ping.
		lines := make(chan []byte, 16)
		go func() {
			defer close(lines)
			for {
				l, err := p.out.ReadBytes('\n')
				if err != nil {
					return
				}
				select {
				case lines <- l:
				case <-t.Context().Done(): // the test is over
					return
				}
			}
		}()
		p.send(strings.NewReplacer("\n", " ", "\r", " ").Replace(line))
		const ping = "fuzz-ping"
		p.send(probe)
		for {
			var raw []byte
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("after %.200q the server closed its output", line)
				}
				raw = l
			case <-time.After(10 * time.Second):
				t.Fatalf("after %.200q the server did not answer a ping within 10 s", line)
			}
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Method  string          `json:"method"`
				Result  json.RawMessage `json:"result"`
				Error   json.RawMessage `json:"error"`
			}
			d := json.NewDecoder(bytes.NewReader(raw))
			d.UseNumber()
			if err := d.Decode(&m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("after %.200q the server wrote %.200q: not a JSON-RPC 2.0 message", line, raw)
			}
			if len(m.ID) > 0 && !validID(m.ID) {
				t.Fatalf("after %.200q the server wrote id %s: not a string, integer or null", line, m.ID)
			}
			if m.Method == "" && (m.Result == nil) == (m.Error == nil) {
				t.Fatalf("after %.200q the server wrote %.200q: a response needs exactly one of result and error", line, raw)
			}
			if string(m.ID) == `"`+ping+`"` && m.Result != nil {
				return
			}
		}
	})
}

func validID(raw json.RawMessage) bool {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return false
	}
	switch v := v.(type) {
	case nil, string:
		return true
	case json.Number:
		return !strings.ContainsAny(v.String(), ".eE")
	}
	return false
}

// FuzzHTTPBody posts one arbitrary body, with arbitrary Mcp-Method and
// Mcp-Name headers, to /mcp, on the sessionless 2026-07-28 wire or within
// a 2025-11-25 session. Whatever it holds, the
// server answers without a 5xx (503, busy, aside) with a JSON-RPC message
// or none, and then still answers a ping on the same wire.
func FuzzHTTPBody(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `null`, `not json`, `{"jsonrpc":"2.0","id":`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_echo","arguments":{"message":"hi"},` + modernMeta + `}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_echo","arguments":"x",` + modernMeta + `}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_echo","arguments":{},"requestState":"a.b","inputResponses":{"x":1},` + modernMeta + `}}`,
		`{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{` + modernMeta + `}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"ping"}]`,
		strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
		strings.Repeat("x", 5000), // over the limit
	} {
		f.Add(seed, true, "tools/call", "test_echo")
		f.Add(seed, false, "", "")
	}
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_echo","arguments":{"message":"hi"},`+modernMeta+`}}`, true, "tools/list", "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_echo","arguments":{"message":"hi"},`+modernMeta+`}}`, true, "tools/call", "other")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_echo","arguments":{"message":"hi"},`+modernMeta+`}}`, true, "tools/call", "")
	srv := fuzzServer(f)
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	f.Cleanup(func() { closeSessions(context.Background()); ts.Close() })

	send := func(t *testing.T, header map[string]string, body string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("POST %.200q: %v", body, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("POST %.200q: reading the answer: %v", body, err)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			var data []byte
			for _, l := range bytes.Split(b, []byte("\n")) {
				if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
					data = d // the last event is the response
				}
			}
			b = data
		}
		return resp.StatusCode, bytes.TrimSpace(b)
	}
	var sessionID string
	f.Fuzz(func(t *testing.T, body string, modern bool, method, name string) {
		if !headerValue(method) || !headerValue(name) {
			t.Skip("net/http refuses to send such a header")
		}
		header := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
		pingHeader := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
		ping := `{"jsonrpc":"2.0","id":"fuzz-ping","method":"server/discover","params":{` + modernMeta + `}}`
		if !modern {
			if sessionID == "" {
				req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(initLine))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if sessionID = resp.Header.Get("Mcp-Session-Id"); sessionID == "" {
					t.Fatal("initialize gave no Mcp-Session-Id")
				}
			}
			header = map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sessionID, "Mcp-Method": method, "Mcp-Name": name}
			pingHeader = map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sessionID}
			ping = `{"jsonrpc":"2.0","id":"fuzz-ping","method":"ping"}`
		}
		status, b := send(t, header, body)
		if status >= 500 && status != http.StatusServiceUnavailable {
			t.Fatalf("POST %.200q: HTTP %d %.200q", body, status, b)
		}
		if len(b) > 0 && b[0] == '{' {
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal(b, &m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("POST %.200q: HTTP %d %.200q is no JSON-RPC 2.0 message", body, status, b)
			}
			if len(m.ID) > 0 && !validID(m.ID) {
				t.Fatalf("POST %.200q: HTTP %d %.200q answers with an id that is no string or integer", body, status, b)
			}
		}
		if status, b := send(t, pingHeader, ping); status != http.StatusOK || !bytes.Contains(b, []byte(`"result"`)) {
			t.Fatalf("after POST %.200q a ping got HTTP %d %.200q", body, status, b)
		}
	})
}

// headerValue reports whether net/http sends v as a header value: no
// control characters but tab.
func headerValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}

// fuzzServer serves test.echo alone (a tool that blocks would turn an input
// that calls it into a timeout) with a 4 KiB message limit, so inputs
// also reach the refusal of oversized messages.
func fuzzServer(tb testing.TB) *mcpserver.Server {
	tb.Helper()
	reg := registry.New()
	reg.MustRegister(echoTool())
	h := newHost(tb, reg, "")
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Limits: mcpserver.Limits{MaxMessageBytes: 4096}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}
