package upstream_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	_ "github.com/bubbuild/bub-mcp/spill"
	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// An HTTP upstream gets the configured headers and the bearer token from
// the named variable on every request.
func TestHTTPHeadersAndBearer(t *testing.T) {
	s := server.NewMCPServer("auth-upstream", "1")
	addEcho(s, "who")
	inner := server.NewStreamableHTTPServer(s, server.WithStateful(true))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Team") != "core" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Setenv("UPSTREAM_TEST_TOKEN", "s3cret")
	src := "[upstreams.auth]\nurl = \"" + ts.URL + "/mcp\"\nheaders = { X-Team = \"core\" }\nbearer_token_env = \"UPSTREAM_TEST_TOKEN\"\n" +
		"[upstreams.noauth]\nurl = \"" + ts.URL + "/mcp\"\nbearer_token_env = \"UPSTREAM_TEST_UNSET\"\n"
	h := newHost(t, src, "")
	if res := h.call(t.Context(), "auth.who", map[string]any{"text": "me"}); res.Err != nil || res.Text != "who: me" {
		t.Fatalf("authorized call: %q, %v", res.Text, res.Err)
	}
	if s := h.status(t, "noauth"); s.State == "ready" || !strings.Contains(s.LastError, "UPSTREAM_TEST_UNSET") {
		t.Errorf("noauth: %+v; want a failed start naming the variable", s)
	}
}

// A client on the sessionless 2026-07-28 protocol is asked through
// input_required rounds: the upstream's elicitation becomes an input
// request, the client (mcp-go drives the rounds itself) answers, and the
// retry runs the upstream call again, which now gets the answer.
func TestElicitationOnTheSessionlessWire(t *testing.T) {
	h := newHost(t, everything(t, ""), "")
	h.waitTool(t, "everything.trigger-elicitation-request")
	_, url := h.serve(t)
	tr, err := transport.NewStreamableHTTP(url + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	c := client.NewClient(tr, client.WithElicitationHandler(elicitFunc(func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		asked++
		r := &mcp.ElicitationResult{}
		r.Action, r.Content = mcp.ElicitationResponseActionAccept, map[string]any{"name": "Ada Lovelace"}
		return r, nil
	})))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "modern", Version: "1"}
	res, err := c.Initialize(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtocolVersion != mcp.LATEST_PROTOCOL_VERSION {
		t.Fatalf("negotiated %s, not the sessionless protocol", res.ProtocolVersion)
	}
	call := mcp.CallToolRequest{}
	call.Params.Name = "everything_trigger-elicitation-request"
	out, err := c.CallTool(t.Context(), call)
	if err != nil || out.IsError || asked != 1 || !strings.Contains(allText(out), "Ada Lovelace") {
		t.Errorf("got %+v (%q), %v, asked %d times; want the answer in the result, asked once", out, allText(out), err, asked)
	}
}

// A huge upstream result is spilled like any tool's: the client reads the
// reference, not the text.
func TestSpillOfUpstreamResult(t *testing.T) {
	h := newHost(t, everything(t, "")+"[tools]\nspill_threshold = 16\n", "", "spill")
	via, _ := h.serve(t)
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "everything_echo", map[string]any{"message": strings.Repeat("long ", 800)}
	res, err := via.CallTool(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	text := allText(res)
	if res.IsError || strings.Contains(text, strings.Repeat("long ", 800)) || !strings.Contains(text, "spill") {
		t.Errorf("got %q; want a spill reference", text)
	}
}

// A message over max_message_bytes is not read whole: a stdio server that
// sends one is restarted (the call fails naming the key), an HTTP response
// over it fails its call.
func TestMaxMessageBytes(t *testing.T) {
	big := strings.Repeat("x", 60000)
	t.Run("stdio", func(t *testing.T) {
		memCmd, memArgs := npmServer(t, "server-memory")
		home := t.TempDir()
		h := newHost(t, stdioTable("memory", memCmd, memArgs, `max_message_bytes = 50000
env = { MEMORY_FILE_PATH = "`+home+`/memory.jsonl" }`), home)
		res := h.call(t.Context(), "memory.create_entities", map[string]any{"entities": []any{map[string]any{"name": "big", "entityType": "blob", "observations": []string{big}}}})
		if res.Err == nil || !strings.Contains(res.Err.Message, "upstreams.memory.max_message_bytes") {
			t.Fatalf("oversized answer: %+v; want an error naming the key", res.Err)
		}
		h.waitState(t, "memory", "ready", func(s upstream.Status) bool { return s.Restarts == 1 })
		if res := h.call(t.Context(), "memory.search_nodes", map[string]any{"query": "nothing-here"}); res.Err != nil {
			t.Fatalf("after the restart: %v", res.Err)
		}
	})
	t.Run("http", func(t *testing.T) {
		s, url := testServer(t, "small")
		s.AddTool(mcp.NewTool("big"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(big), nil
		})
		h := newHost(t, "[upstreams.web]\nurl = \""+url+"\"\nmax_message_bytes = 50000\n", "")
		res := h.call(t.Context(), "web.big", map[string]any{})
		if res.Err == nil || !strings.Contains(res.Err.Message, "upstreams.web.max_message_bytes") {
			t.Fatalf("oversized response: %+v; want an error naming the key", res.Err)
		}
		if res := h.call(t.Context(), "web.small", map[string]any{"text": "ok"}); res.Err != nil {
			t.Fatalf("next call: %v", res.Err)
		}
	})
}
