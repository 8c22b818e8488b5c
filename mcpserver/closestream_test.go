package mcpserver_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
)

// TestCloseStream: on a 2025 session a tool ends its response stream
// mid-call (SEP-1699) and its result still reaches the client, which
// resumes with Last-Event-ID (mcp-go's client does); the sessionless
// 2026-07-28 wire has no stream to resume, so CloseStream reports false
// there and the call answers as usual. So it does for a tool not marked
// ClosesStream, whose calls are served in place.
func TestCloseStream(t *testing.T) {
	closer := func(ctx context.Context, _ *registry.ToolContext, _ struct{}) (string, error) {
		closed := mcpserver.CloseStream(ctx)
		select {
		case <-time.After(100 * time.Millisecond): // the result comes after the stream ended
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return strconv.FormatBool(closed), nil
	}
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("closer", "closes its stream", closer, registry.WithClosesStream()))
	reg.MustRegister(registry.MustNewTool("unmarked", "tries to close its stream", closer))
	h := newHost(t, reg, "[profiles.default]\n")
	handler, closeSessions := httpHandler(newServer(t, h), streamhttp.Options{Profiles: h.Config().ProfileNames()})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })

	for _, tt := range []struct{ tool, version, want string }{
		{"closer", legacy, "true"},
		{"closer", modern, "false"},
		{"unmarked", legacy, "false"},
	} {
		t.Run(tt.tool+"/"+tt.version, func(t *testing.T) {
			res, err := call(t, connect(t, ts.URL+"/mcp", tt.version, nil), tt.tool, nil)
			if err != nil || res.IsError || text(res) != tt.want {
				t.Errorf("%s: CloseStream = %+v, %v; want %s", tt.tool, res, err, tt.want)
			}
		})
	}
}
