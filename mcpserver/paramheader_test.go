package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
)

// A tool whose schema routes a parameter through an HTTP header
// (x-mcp-header, SEP-2243) has its Mcp-Param header checked against the
// body on the 2026-07-28 wire, while mcp-go's table holds bare entries for
// tools without such annotations: both kinds are callable, and a mismatch
// is refused.
func TestParamHeaderChecked(t *testing.T) {
	reg := registry.New()
	query, err := registry.NewRawTool("test.query", "Runs a query in a region.", json.RawMessage(`{
		"type": "object",
		"properties": {"sql": {"type": "string"}, "region": {"type": "string", "x-mcp-header": "Region"}}
	}`), func(ctx context.Context, tc *registry.ToolContext, args json.RawMessage) (any, error) {
		var in struct{ Region string }
		_ = json.Unmarshal(args, &in)
		return "ran in " + in.Region, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range []*registry.Tool{query, echoTool()} {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	h := newHost(t, reg, "")
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hd := streamhttp.New(srv, streamhttp.Options{Profiles: h.Config().ProfileNames()})
	ts := httptest.NewServer(hd)
	t.Cleanup(func() { hd.CloseSessions(context.Background()); ts.Close() })

	post := func(name string, args map[string]any, headers map[string]string) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
			"name": name, "arguments": args, "_meta": map[string]any{
				mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
				mcp.MetaKeyClientInfo:         map[string]any{"name": "t", "version": "1"},
				mcp.MetaKeyClientCapabilities: map[string]any{},
			}}})
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, "tools/call")
		req.Header.Set(mcp.HeaderName, name)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatalf("%s: %d, %v", name, res.StatusCode, err)
		}
		return out
	}
	text := func(out map[string]any) string {
		r, _ := out["result"].(map[string]any)
		c, _ := r["content"].([]any)
		if len(c) == 0 {
			return ""
		}
		s, _ := c[0].(map[string]any)["text"].(string)
		return s
	}
	if got := text(post("test_query", map[string]any{"region": "eu"}, map[string]string{mcp.HeaderParamPrefix + "Region": "eu"})); got != "ran in eu" {
		t.Errorf("mirrored header: %q; want ran in eu", got)
	}
	out := post("test_query", map[string]any{"region": "eu"}, map[string]string{mcp.HeaderParamPrefix + "Region": "us"})
	if e, _ := out["error"].(map[string]any); e == nil || e["code"] != float64(mcp.HEADER_MISMATCH) {
		t.Errorf("mismatched header: %v; want error %d", out, mcp.HEADER_MISMATCH)
	}
	if got := text(post("test_echo", map[string]any{"message": "hi"}, nil)); got != "hi" {
		t.Errorf("a tool without header annotations: %q; want hi", got)
	}
}
