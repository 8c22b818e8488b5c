package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/google/go-cmp/cmp"
)

// TestNoMethod: a message with an id but no method, result or error is
// no request and no response; both transports refuse it with -32600 and
// its id (mcpgofix/nomethod.go), where mcp-go said "Method  not found"
// on stdio and 202 Accepted over HTTP.
func TestNoMethod(t *testing.T) {
	type answer struct {
		Status int
		Code   string
		ID     any
	}
	want := []answer{{Code: "-32600", ID: json.Number("9")}, {Code: "-32600", ID: "s"}}
	lines := []string{`{"jsonrpc":"2.0","id":9}`, `{"jsonrpc":"2.0","id":"s","params":{}}`}

	t.Run("stdio", func(t *testing.T) {
		p := startStdio(t, boundsServer(t, mcpserver.Limits{}, nil))
		p.send(initLine)
		p.recv()
		var got []answer
		for _, l := range lines {
			p.send(l)
			m := p.recv()
			code, _ := errorOf(m)
			got = append(got, answer{Code: code, ID: m["id"]})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answers (-want +got):\n%s", diff)
		}
	})
	t.Run("http", func(t *testing.T) {
		handler, closeSessions := httpHandler(boundsServer(t, mcpserver.Limits{}, nil), streamhttp.Options{Profiles: []string{"default"}})
		ts := httptest.NewServer(handler)
		defer func() { closeSessions(context.Background()); ts.Close() }()
		_, header, _ := post(t, ts.URL+"/mcp", nil, initLine)
		h := map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": header.Get("Mcp-Session-Id")}
		var got []answer
		for _, l := range lines {
			status, _, m := post(t, ts.URL+"/mcp", h, l)
			code, _ := errorOf(m)
			got = append(got, answer{Status: status, Code: code, ID: m["id"]})
		}
		wantHTTP := []answer{}
		for _, a := range want {
			a.Status = http.StatusBadRequest
			wantHTTP = append(wantHTTP, a)
		}
		if diff := cmp.Diff(wantHTTP, got); diff != "" {
			t.Errorf("answers (-want +got):\n%s", diff)
		}
	})
}
