package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// echoExtension serves test/echo: it answers the caller's profile and the
// params it got, -32602 for {"fail":true}, and panics for {"panic":true}.
func echoExtension() mcpserver.Extension {
	return mcpserver.Extension{
		Capabilities: mcpserver.Capabilities{Extensions: map[string]any{"io.example/echo": map[string]any{"loud": true}}},
		Methods: map[string]mcpserver.MethodFunc{
			"test/echo": func(ctx context.Context, conn *providers.Connection, params json.RawMessage, modern bool) (any, error) {
				var p struct{ Fail, Panic, Plain bool }
				_ = json.Unmarshal(params, &p)
				switch {
				case p.Fail:
					return nil, &mcpserver.MethodError{Code: mcp.INVALID_PARAMS, Message: "asked to fail"}
				case p.Plain:
					return nil, errors.New("plain failure")
				case p.Panic:
					panic("asked to panic")
				}
				return map[string]any{"profile": conn.Profile, "client": conn.ClientName, "modern": modern, "params": json.RawMessage(params)}, nil
			},
		},
	}
}

func newEchoServer(t *testing.T) *mcpserver.Server {
	t.Helper()
	h := newHost(t, registry.New(), "")
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler), Extensions: []mcpserver.Extension{echoExtension()}})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"m","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// post sends one JSON-RPC message over HTTP and returns the status, the
// response headers and the decoded body (nil when there is none).
func post(t *testing.T, url string, header map[string]string, line string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(line))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := strings.TrimSpace(string(b))
	if i := strings.LastIndex(body, "data: "); strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && i >= 0 {
		body = body[i+len("data: "):]
	}
	if body == "" || !strings.HasPrefix(body, "{") {
		return resp.StatusCode, resp.Header, nil
	}
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("HTTP %d %q: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, resp.Header, m
}

// TestExtensionMethods: a method an Extension adds is answered on both
// transports and both eras, with the request's id as sent, its errors
// coded as the extension says, a panic contained, and the extension
// declared in the capabilities. Without the methods.go workaround mcp-go
// answers every such request -32601.
func TestExtensionMethods(t *testing.T) {
	srv := newEchoServer(t)
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })

	// A 2025-11-25 HTTP session.
	_, h, init := post(t, ts.URL+"/mcp", nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"legacy-http","version":"1"}}}`)
	sid := h.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: no session id (%v)", init)
	}
	caps, _ := init["result"].(map[string]any)["capabilities"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"io.example/echo": map[string]any{"loud": true}}, caps["extensions"]); diff != "" {
		t.Errorf("capabilities.extensions (-want +got):\n%s", diff)
	}
	session := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	post(t, ts.URL+"/mcp", session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	modern := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "test/echo"}

	stdio := startStdio(t, srv)
	stdio.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"legacy-stdio","version":"1"}}}`)
	stdio.recv()
	stdio.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	modernStdio := startStdio(t, srv)

	type exchange func(line string) (int, map[string]any)
	httpWith := func(header map[string]string) exchange {
		return func(line string) (int, map[string]any) {
			status, _, m := post(t, ts.URL+"/mcp", header, line)
			return status, m
		}
	}
	onStdio := func(p *stdioPeer) exchange {
		return func(line string) (int, map[string]any) { p.send(line); return 0, p.recv() }
	}
	for _, tc := range []struct {
		name   string
		send   exchange
		meta   string
		client string
		modern bool
	}{
		{"http-2025", httpWith(session), "", "legacy-http", false},
		{"http-2026", httpWith(modern), "," + modernMeta, "", true},
		{"stdio-2025", onStdio(stdio), "", "legacy-stdio", false},
		{"stdio-2026", onStdio(modernStdio), "," + modernMeta, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, got := tc.send(`{"jsonrpc":"2.0","id":"a-1","method":"test/echo","params":{"x":1` + tc.meta + `}}`)
			res, _ := got["result"].(map[string]any)
			if got["id"] != "a-1" || res == nil || res["profile"] != "default" || res["client"] != tc.client || res["modern"] != tc.modern || res["params"].(map[string]any)["x"] != json.Number("1") {
				t.Errorf("echo: %d %v", status, got)
			}
			if status != 0 && status != http.StatusOK {
				t.Errorf("echo: HTTP %d", status)
			}
			// An id that is no string or integer is never echoed, even
			// when the request is wrong otherwise too (no "jsonrpc").
			for _, line := range []string{
				`{"jsonrpc":"2.0","id":{"a":1},"method":"test/echo","params":{"x":1` + tc.meta + `}}`,
				`{"id":{"a":1},"method":"test/echo","params":{"x":1` + tc.meta + `}}`,
			} {
				if _, got := tc.send(line); got["error"] == nil || got["id"] != nil {
					t.Errorf("%s: %v; want an error with id null", line, got)
				}
			}
			// An integer id beyond float64's exact range comes back digit for digit.
			_, got = tc.send(`{"jsonrpc":"2.0","id":9007199254740993,"method":"test/echo","params":{"y":2` + tc.meta + `}}`)
			if got["id"] != json.Number("9007199254740993") {
				t.Errorf("big id came back as %v", got["id"])
			}
			for _, e := range []struct {
				params     string
				code       int
				message    string
				httpStatus int
			}{
				{`{"fail":true`, mcp.INVALID_PARAMS, "asked to fail", http.StatusBadRequest},
				{`{"plain":true`, mcp.INTERNAL_ERROR, "plain failure", http.StatusOK},
				{`{"panic":true`, mcp.INTERNAL_ERROR, "internal error: asked to panic", http.StatusOK},
			} {
				status, got := tc.send(`{"jsonrpc":"2.0","id":7,"method":"test/echo","params":` + e.params + tc.meta + `}}`)
				errObj, _ := got["error"].(map[string]any)
				if got["id"] != json.Number("7") || errObj == nil || errObj["code"] != json.Number(strconv.Itoa(e.code)) || errObj["message"] != e.message {
					t.Errorf("%s: %v", e.params, got)
				}
				if want := e.httpStatus; tc.name == "http-2026" && status != want {
					t.Errorf("%s: HTTP %d, want %d", e.params, status, want)
				}
			}
		})
	}

	// A session mcp-go never issued is mcp-go's to refuse, as for any
	// other method; so is a 2026 request whose Mcp-Method header lies.
	if status, _, _ := post(t, ts.URL+"/mcp", map[string]string{"Mcp-Session-Id": "mcp-session-00000000-0000-0000-0000-000000000000", "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":2,"method":"test/echo"}`); status == http.StatusOK {
		t.Errorf("unknown session: HTTP %d", status)
	}
	if status, _, got := post(t, ts.URL+"/mcp", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, `{"jsonrpc":"2.0","id":3,"method":"test/echo","params":{`+modernMeta+`}}`); status == http.StatusOK && got["result"] != nil {
		t.Errorf("mismatched Mcp-Method header was served: %v", got)
	}
	// Methods nobody serves are still mcp-go's.
	if _, got := httpWith(map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "test/nope"})(`{"jsonrpc":"2.0","id":4,"method":"test/nope","params":{` + modernMeta + `}}`); got["error"] == nil || got["error"].(map[string]any)["code"] != json.Number(strconv.Itoa(mcp.METHOD_NOT_FOUND)) {
		t.Errorf("unknown method: %v", got)
	}
}

// TestExtensionMethodClash: two extensions serving one method are refused
// when the server is built.
func TestExtensionMethodClash(t *testing.T) {
	h := newHost(t, registry.New(), "")
	_, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler), Extensions: []mcpserver.Extension{echoExtension(), echoExtension()}})
	if err == nil || !strings.Contains(err.Error(), `"test/echo"`) {
		t.Errorf("err = %v, want a clash naming test/echo", err)
	}
}
