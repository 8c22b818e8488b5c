package mcpserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// liveSource is a Live Extension whose catalog a test changes: groups "a"
// and "b", where "b" is hidden from the profile "blind".
type liveSource struct {
	mu       sync.Mutex
	cat      mcpserver.Catalog
	notifier mcpserver.Notifier
	subs     []string // Subscribe calls, by URI
	unsubs   []string // Unsubscribe calls
}

func (l *liveSource) read(ctx context.Context, conn *providers.Connection, req mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
	return []mcpserver.ResourceContents{{URI: req.URI, Text: "read " + req.URI}}, nil
}

func (l *liveSource) set(cat mcpserver.Catalog) {
	l.mu.Lock()
	l.cat = cat
	n := l.notifier
	l.mu.Unlock()
	n.Changed()
}

func (l *liveSource) extension() mcpserver.Extension {
	return mcpserver.Extension{
		Complete: func(ctx context.Context, conn *providers.Connection, req mcpserver.CompleteRequest) ([]string, error) {
			return []string{"live:" + req.Prompt + req.Resource}, nil
		},
		Live: &mcpserver.Live{
			Catalog: func() mcpserver.Catalog {
				l.mu.Lock()
				defer l.mu.Unlock()
				return l.cat
			},
			Visible: func(ctx context.Context, conn *providers.Connection, group string) bool {
				return group != "b" || conn.Profile != "blind"
			},
			Subscribe: func(ctx context.Context, conn *providers.Connection, uri string) error {
				l.mu.Lock()
				defer l.mu.Unlock()
				if uri == "live://b/one" && conn.Profile == "blind" {
					return errors.New("not found")
				}
				l.subs = append(l.subs, uri)
				return nil
			},
			Unsubscribe: func(uri string) {
				l.mu.Lock()
				defer l.mu.Unlock()
				l.unsubs = append(l.unsubs, uri)
			},
			Start: func(n mcpserver.Notifier) {
				l.mu.Lock()
				defer l.mu.Unlock()
				l.notifier = n
			},
		},
	}
}

func (l *liveSource) resource(uri, group string) mcpserver.Resource {
	return mcpserver.Resource{ResourceInfo: mcpserver.ResourceInfo{URI: uri, Name: uri, Meta: map[string]any{"ui": map[string]any{"prefersBorder": true}}}, Read: l.read, Group: group}
}

func (l *liveSource) prompt(name, group string) mcpserver.Prompt {
	return mcpserver.Prompt{Name: name, Group: group, Get: func(ctx context.Context, conn *providers.Connection, req *mcpserver.PromptRequest) (*mcpserver.PromptResult, error) {
		return &mcpserver.PromptResult{Messages: []mcpserver.PromptMessage{{Role: "user", Content: registry.Content{Type: "text", Text: "prompt " + name}}}}, nil
	}}
}

// stdioLiveClient serves srv over an in-memory stdio pair for profile and
// returns an initialized 2025 client and its notifications' methods.
func stdioLiveClient(t *testing.T, srv *mcpserver.Server, profile string) (*client.Client, chan string) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() {
		served <- stdio.Serve(ctx, srv, inR, outW, providers.Connection{Profile: profile}, time.Second)
	}()
	t.Cleanup(func() { cancel(); inW.Close(); <-served })
	c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(nil)), client.WithProtocolVersion(legacy))
	notes := make(chan string, 64)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		m := n.Method
		if uri, ok := n.Params.AdditionalFields["uri"].(string); ok {
			m += " " + uri
		}
		select {
		case notes <- m:
		default:
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	return c, notes
}

// waitNote waits for the notification want (a bound, not a timing).
func waitNote(t *testing.T, notes chan string, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-notes:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q notification", want)
		}
	}
}

// A Live Extension's catalog changes while the server runs: clients are
// told and list the new state; each caller sees only the groups Visible
// lets it; a hidden template routes reads without being listed;
// subscriptions reach Subscribe, updates reach subscribers, and the last
// unsubscription reaches Unsubscribe; completions go to the Extension
// that serves the prompt.
func TestLiveExtension(t *testing.T) {
	h := newHost(t, registry.New(), "[profiles.default]\n[profiles.blind]\n")
	src := &liveSource{}
	src.cat = mcpserver.Catalog{
		// test:// is the static Extension's: a Live entry of it is left out.
		Resources: []mcpserver.Resource{src.resource("live://a/one", "a"), src.resource("live://b/one", "b"), src.resource("test://text", "a")},
		Templates: []mcpserver.ResourceTemplate{
			{URITemplate: "live://a/item/{id}", Name: "item", Read: src.read, Group: "a"},
			{URITemplate: "test://{+path}", Name: "shadow", Read: src.read, Group: "a"},
			{URITemplate: "{scheme}://b/{+path}", Name: "b-all", Read: src.read, Group: "b", Hidden: true},
		},
		Prompts: []mcpserver.Prompt{src.prompt("a_p", "a"), src.prompt("b_p", "b")},
	}
	static := testExtension()
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler),
		Extensions: []mcpserver.Extension{static, src.extension()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c, notes := stdioLiveClient(t, srv, "default")
	blind, _ := stdioLiveClient(t, srv, "blind")

	uris := func(c *client.Client) []string {
		res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range res.Resources {
			out = append(out, r.URI)
		}
		slices.Sort(out)
		return out
	}
	if diff := cmp.Diff([]string{"live://a/one", "live://b/one", "test://blob", "test://text"}, uris(c)); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"live://a/one", "test://blob", "test://text"}, uris(blind)); diff != "" {
		t.Errorf("blind's resources (-want +got):\n%s", diff)
	}
	templates, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var raw []string
	for _, tm := range templates.ResourceTemplates {
		raw = append(raw, tm.URITemplate.Raw())
	}
	slices.Sort(raw)
	if diff := cmp.Diff([]string{"live://a/item/{id}", "test://item/{id}"}, raw); diff != "" {
		t.Errorf("templates (-want +got), the hidden one left out:\n%s", diff)
	}
	if read, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "test://text"}}); err != nil || read.Contents[0].(mcp.TextResourceContents).Text != "for default" {
		t.Errorf("read test://text: %+v, %v; want the static Extension's", read, err)
	}
	read, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "other://b/not/listed"}})
	if err != nil || read.Contents[0].(mcp.TextResourceContents).Text != "read other://b/not/listed" {
		t.Errorf("read through the hidden template: %+v, %v", read, err)
	}
	for _, uri := range []string{"live://b/one", "other://b/not/listed"} {
		if _, err := blind.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}}); err == nil {
			t.Errorf("blind read %s", uri)
		}
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name = "b_p"
	if _, err := blind.GetPrompt(ctx, get); err == nil {
		t.Error("blind got prompt b_p")
	}
	if pr, err := c.GetPrompt(ctx, get); err != nil || pr.Messages[0].Content.(mcp.TextContent).Text != "prompt b_p" {
		t.Errorf("get b_p: %+v, %v", pr, err)
	}

	// Completions go to the Extension that serves the prompt.
	comp := mcp.CompleteRequest{}
	comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "a_p"}
	comp.Params.Argument.Name = "x"
	if res, err := c.Complete(ctx, comp); err != nil || !slices.Equal(res.Completion.Values, []string{"live:a_p"}) {
		t.Errorf("complete a_p: %+v, %v", res, err)
	}
	comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "greet"}
	comp.Params.Argument.Value = "gr"
	if res, err := c.Complete(ctx, comp); err != nil || !slices.Equal(res.Completion.Values, []string{"greet/x=grace"}) {
		t.Errorf("complete greet: %+v, %v", res, err)
	}

	// Subscriptions: two clients, one upstream subscription's worth of
	// Unsubscribe when both left; blind cannot subscribe to b.
	sub := func(c *client.Client, uri string) {
		//lint:ignore SA1019 resources/subscribe is the 2025-11-25 session protocol's way, which this checks
		if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}}); err != nil {
			t.Fatal(err)
		}
	}
	sub(c, "live://a/one")
	sub(blind, "live://a/one")
	sub(blind, "live://b/one")
	src.notifier.Updated("live://a/one")
	waitNote(t, notes, "notifications/resources/updated live://a/one")
	//lint:ignore SA1019 as above
	if err := c.Unsubscribe(ctx, mcp.UnsubscribeRequest{Params: mcp.UnsubscribeParams{URI: "live://a/one"}}); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	unsubs := slices.Clone(src.unsubs)
	src.mu.Unlock()
	if len(unsubs) != 0 {
		t.Errorf("Unsubscribe %v while blind is still subscribed", unsubs)
	}
	//lint:ignore SA1019 as above
	if err := blind.Unsubscribe(ctx, mcp.UnsubscribeRequest{Params: mcp.UnsubscribeParams{URI: "live://a/one"}}); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	subs, unsubs := slices.Clone(src.subs), slices.Clone(src.unsubs)
	src.mu.Unlock()
	if diff := cmp.Diff([]string{"live://a/one", "live://a/one"}, subs); diff != "" {
		t.Errorf("Subscribe calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"live://a/one"}, unsubs); diff != "" {
		t.Errorf("Unsubscribe calls (-want +got):\n%s", diff)
	}

	// The catalog changes: a resource and a template go, one resource and
	// one prompt come; clients are told of both kinds.
	src.set(mcpserver.Catalog{
		Resources: []mcpserver.Resource{src.resource("live://a/two", "a")},
		Prompts:   []mcpserver.Prompt{src.prompt("a_p", "a"), src.prompt("a_q", "a")},
	})
	waitNote(t, notes, "notifications/resources/list_changed")
	waitNote(t, notes, "notifications/prompts/list_changed")
	// The same catalog again is no change: no list_changed comes before
	// the update that follows it.
	sub(c, "live://a/two")
	src.notifier.Updated("live://a/two") // after every notification of the change
	waitNote(t, notes, "notifications/resources/updated live://a/two")
	src.notifier.Changed()
	src.notifier.Updated("live://a/two")
	for got := ""; got != "notifications/resources/updated live://a/two"; {
		select {
		case got = <-notes:
			if strings.HasSuffix(got, "list_changed") {
				t.Errorf("%s for an unchanged catalog", got)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no update for live://a/two")
		}
	}
	if diff := cmp.Diff([]string{"live://a/two", "test://blob", "test://text"}, uris(c)); diff != "" {
		t.Errorf("resources after the change (-want +got):\n%s", diff)
	}
	if templates, err = c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{}); err != nil || len(templates.ResourceTemplates) != 1 {
		t.Errorf("templates after the change: %+v, %v; want the static one only", templates, err)
	}
	prompts, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range prompts.Prompts {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"a_p", "a_q", "ask", "greet"}, names); diff != "" {
		t.Errorf("prompts after the change (-want +got):\n%s", diff)
	}
	if _, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "live://b/one"}}); err == nil {
		t.Error("a removed resource is still read")
	}
}

// Updated does not wait for a Subscribe in progress: an upstream's
// notification reader calls it, and the subscription Subscribe waits for
// is answered on that same reader, so waiting would stall the
// subscription until it timed out.
func TestLiveUpdatedDuringSubscribe(t *testing.T) {
	h := newHost(t, registry.New(), "[profiles.default]\n")
	var n mcpserver.Notifier
	res := mcpserver.Resource{ResourceInfo: mcpserver.ResourceInfo{URI: "live://a/one", Name: "one"},
		Read: func(ctx context.Context, conn *providers.Connection, req mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
			return []mcpserver.ResourceContents{{URI: req.URI, Text: "one"}}, nil
		}}
	live := &mcpserver.Live{
		Catalog: func() mcpserver.Catalog { return mcpserver.Catalog{Resources: []mcpserver.Resource{res}} },
		Subscribe: func(ctx context.Context, conn *providers.Connection, uri string) error {
			done := make(chan struct{})
			go func() { n.Updated("live://a/other"); close(done) }()
			select {
			case <-done:
				return nil
			case <-time.After(30 * time.Second): // a bound, not a timing
				return errors.New("Updated waited for Subscribe")
			}
		},
		Start: func(x mcpserver.Notifier) { n = x },
	}
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler),
		Extensions: []mcpserver.Extension{{Live: live}}})
	if err != nil {
		t.Fatal(err)
	}
	c, notes := stdioLiveClient(t, srv, "default")
	//lint:ignore SA1019 resources/subscribe is the 2025-11-25 session protocol's way
	if err := c.Subscribe(t.Context(), mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: "live://a/one"}}); err != nil {
		t.Fatal(err)
	}
	// A refused Subscribe leaves the client unsubscribed: no update.
	n.Updated("live://a/one")
	waitNote(t, notes, "notifications/resources/updated live://a/one")
}
