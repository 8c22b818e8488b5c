package mcpserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/google/go-cmp/cmp"
)

// TestFastCallMatchesMCPGo sends the same requests to a server with the
// tools/call fast path and to one that hands everything to mcp-go: status,
// content type and body must be identical, and the fast path must have
// answered exactly the requests it is meant for.
func TestFastCallMatchesMCPGo(t *testing.T) {
	h := newHost(t, testRegistry(&fixture{started: make(chan struct{}, 1)}), testConfig)
	serve := func(fast bool) (*mcpserver.Server, string) {
		srv := newServer(t, h)
		if !fast {
			mcpserver.DisableFastPath(srv)
		}
		handler, closeSessions := srv.Handler(mcpserver.HTTPOptions{Profiles: h.Config().ProfileNames(), CheckHosts: true})
		ts := httptest.NewServer(handler)
		t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
		return srv, ts.URL
	}
	fastSrv, fastURL := serve(true)
	_, slowURL := serve(false)

	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`
	call := func(id, name, args string) string {
		if args != "" {
			args = `"arguments":` + args + `,`
		}
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `",` + args + meta + `}}}`
	}
	tests := []struct {
		name, path, mcpName, body string
		header                    map[string]string
		fast                      bool
	}{
		{name: "echo", mcpName: "test_echo", body: call("1", "test_echo", `{"message":"hi <&> \"x\""}`), fast: true},
		{name: "string id", mcpName: "test_echo", body: call(`"a-1"`, "test_echo", `{"message":"é"}`), fast: true},
		{name: "structured", mcpName: "orders_get", body: call("2", "orders_get", `{"order_id":"A1"}`), fast: true},
		{name: "tool error", mcpName: "orders_get", body: call("3", "orders_get", `{"order_id":"missing"}`), fast: true},
		{name: "invalid arguments", mcpName: "orders_get", body: call("4", "orders_get", `{"order_id":5}`), fast: true},
		{name: "no arguments", mcpName: "admin_secret", body: call("5", "admin_secret", ""), fast: true},
		{name: "null arguments", mcpName: "admin_secret", body: call("6", "admin_secret", "null"), fast: true},
		{name: "hidden tool", path: "/mcp/p/ro", mcpName: "admin_secret", body: call("7", "admin_secret", "")},
		{name: "unknown tool", mcpName: "nope", body: call("8", "nope", "")},
		{name: "name header mismatch", mcpName: "test_echo", body: call("9", "orders_get", `{"order_id":"A1"}`)},
		{name: "progress token", mcpName: "test_progress", body: strings.Replace(call("10", "test_progress", ""), `"_meta":{`, `"_meta":{"progressToken":"p",`, 1)},
		{name: "log level", mcpName: "test_echo", body: strings.Replace(call("11", "test_echo", `{"message":"x"}`), `"_meta":{`, `"_meta":{"io.modelcontextprotocol/logLevel":"debug",`, 1)},
		{name: "no client capabilities", mcpName: "test_echo", body: strings.Replace(call("12", "test_echo", `{"message":"x"}`), `"io.modelcontextprotocol/clientCapabilities":{},`, "", 1)},
		{name: "version mismatch", mcpName: "test_echo", body: call("13", "test_echo", `{"message":"x"}`), header: map[string]string{"Mcp-Protocol-Version": "2027-01-01"}},
		{name: "not JSON", mcpName: "test_echo", body: `{"jsonrpc":"2.0","id":14,`},
		{name: "wrong content type", mcpName: "test_echo", body: call("15", "test_echo", `{"message":"x"}`), header: map[string]string{"Content-Type": "text/plain"}},
	}
	send := func(base string, tt struct {
		name, path, mcpName, body string
		header                    map[string]string
		fast                      bool
	}) (int, string, string) {
		path := tt.path
		if path == "" {
			path = "/mcp"
		}
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", modern)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tt.mcpName)
		for k, v := range tt.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := mcpserver.FastServed(fastSrv)
			fs, fct, fb := send(fastURL, tt)
			ss, sct, sb := send(slowURL, tt)
			got := fmt.Sprintf("%d %s\n%s", fs, fct, fb)
			want := fmt.Sprintf("%d %s\n%s", ss, sct, sb)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("fast path response differs from mcp-go's (-mcp-go +fast):\n%s", diff)
			}
			if served := mcpserver.FastServed(fastSrv) - before; served != map[bool]int64{true: 1}[tt.fast] {
				t.Errorf("fast path served %d requests, want fast=%t", served, tt.fast)
			}
		})
	}
}

// TestFastCallCancelled cancels a fast-path call with notifications/cancelled,
// as mcp-go cancels the calls it runs.
func TestFastCallCancelled(t *testing.T) {
	f := newFixture(t, false)
	post := func(method, name, body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, f.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", modern)
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		return http.DefaultClient.Do(req)
	}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	done := make(chan string, 1)
	go func() {
		resp, err := post("tools/call", "test_slow", `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"test_slow",`+meta+`}}`)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	select {
	case <-f.started:
	case body := <-done:
		t.Fatalf("call returned before it started: %s", body)
	}
	resp, err := post("notifications/cancelled", "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41,`+meta+`}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	body := <-done
	if f.cancels.Load() != 1 || !strings.Contains(body, `"isError":true`) {
		t.Errorf("call not cancelled: cancels=%d, response %s", f.cancels.Load(), body)
	}
}

// TestStdioFastCallMatchesMCPGo is TestFastCallMatchesMCPGo for stdio, in
// both protocol eras: the lines a client reads (notifications included)
// are identical with and without the fast path.
func TestStdioFastCallMatchesMCPGo(t *testing.T) {
	h := newHost(t, testRegistry(&fixture{started: make(chan struct{}, 1)}), testConfig)
	type conn struct {
		srv *mcpserver.Server
		in  *io.PipeWriter
		out *bufio.Reader
	}
	start := func(fast bool) conn {
		srv := newServer(t, h)
		if !fast {
			mcpserver.DisableFastPath(srv)
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		go srv.ServeStdio(ctx, inR, outW, providers.Connection{Profile: "default"}, time.Second)
		t.Cleanup(func() { inW.Close(); cancel() })
		return conn{srv, inW, bufio.NewReader(outR)}
	}
	// exchange sends line and returns what the client reads up to the
	// response with id (or just the line written, for a notification).
	exchange := func(c conn, line, id string) []string {
		if _, err := io.WriteString(c.in, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if id == "" {
			return nil
		}
		var got []string
		for {
			l, err := c.out.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, l)
			if strings.HasPrefix(l, `{"jsonrpc":"2.0","id":`+id+`,`) {
				return got
			}
		}
	}
	fastConn, slowConn := start(true), start(false)

	const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"m","version":"2"}}`
	call := func(id, name, args, meta string) string {
		p := `"name":"` + name + `"`
		if args != "" {
			p += `,"arguments":` + args
		}
		if meta != "" {
			p += "," + meta
		}
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + p + `}}`
	}
	steps := []struct {
		name, line, id string
		fast           bool
	}{
		{name: "initialize", line: `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, id: "0"},
		{name: "initialized", line: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{name: "legacy echo", line: call("1", "test_echo", `{"message":"hi <&>"}`, ""), id: "1", fast: true},
		{name: "legacy structured", line: call("2", "orders_get", `{"order_id":"A1"}`, ""), id: "2", fast: true},
		{name: "legacy tool error", line: call("3", "orders_get", `{"order_id":"missing"}`, ""), id: "3", fast: true},
		{name: "legacy invalid arguments", line: call("4", "orders_get", `{"order_id":[]}`, ""), id: "4", fast: true},
		{name: "legacy no arguments", line: call("5", "admin_secret", "", ""), id: "5", fast: true},
		{name: "legacy progress", line: call("6", "test_progress", "", `"_meta":{"progressToken":7}`), id: "6", fast: true},
		{name: "command-only tool", line: call("7", "admin_command", "", ""), id: "7"},
		{name: "unknown tool", line: call("8", "nope", "", ""), id: "8"},
		{name: "modern echo", line: call(`"m-1"`, "test_echo", `{"message":"é"}`, modernMeta), id: `"m-1"`, fast: true},
		{name: "modern progress", line: call("9", "test_progress", "", strings.Replace(modernMeta, `"_meta":{`, `"_meta":{"progressToken":"p",`, 1)), id: "9", fast: true},
		{name: "modern bad version", line: call("10", "test_echo", `{"message":"x"}`, strings.Replace(modernMeta, "2026-07-28", "2099-01-01", 1)), id: "10"},
		{name: "modern no capabilities", line: call("11", "test_echo", `{"message":"x"}`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), id: "11"},
		{name: "after modern", line: call("12", "test_echo", `{"message":"again"}`, ""), id: "12", fast: true},
	}
	for _, st := range steps {
		before := mcpserver.FastServed(fastConn.srv)
		got := exchange(fastConn, st.line, st.id)
		want := exchange(slowConn, st.line, st.id)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: fast path lines differ from mcp-go's (-mcp-go +fast):\n%s", st.name, diff)
		}
		if served := mcpserver.FastServed(fastConn.srv) - before; served != map[bool]int64{true: 1}[st.fast] {
			t.Errorf("%s: fast path served %d requests, want fast=%t", st.name, served, st.fast)
		}
	}
}
