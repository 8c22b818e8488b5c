package upstream_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// notes collects the notifications a client gets.
type notes struct {
	mu   sync.Mutex
	got  []mcp.JSONRPCNotification
	more chan struct{}
}

func newNotes(c *client.Client) *notes {
	n := &notes{more: make(chan struct{}, 1)}
	c.OnNotification(func(x mcp.JSONRPCNotification) {
		n.mu.Lock()
		n.got = append(n.got, x)
		n.mu.Unlock()
		select {
		case n.more <- struct{}{}:
		default:
		}
	})
	return n
}

// wait waits, at most a minute (a bound for a wedged run, not a timing),
// for a notification of method whose params satisfy pred.
func (n *notes) wait(t *testing.T, method string, pred func(map[string]any) bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		n.mu.Lock()
		for _, x := range n.got {
			if x.Method == method && (pred == nil || pred(x.Params.AdditionalFields)) {
				n.mu.Unlock()
				return
			}
		}
		n.mu.Unlock()
		select {
		case <-n.more:
		case <-deadline:
			t.Fatalf("no %s notification within a minute", method)
		}
	}
}

// wholeServerFile is the bub.toml of the whole-server tests:
// server-everything, and a profile denied its tools.
func wholeServerFile(t *testing.T) string {
	return everything(t, "") + "[profiles.default]\n[profiles.blind]\ndeny = [\"everything.*\"]\n"
}

// checkWholeServer drives server-everything's resources, templates,
// prompts, completions, subscriptions and list changes through bub-mcp
// with c, whose notifications are n. listen opens a 2026-07-28
// subscriptions/listen stream for uri (nil on a 2025 session, which
// subscribes with resources/subscribe).
func checkWholeServer(t *testing.T, c *client.Client, n *notes, listen func(uri string)) {
	ctx := t.Context()
	// The upstream's tools are listed once it is up; its catalog follows.
	const doc = "demo://everything/resource/static/document/architecture.md"
	var res *mcp.ListResourcesResult
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		if res, err = c.ListResources(ctx, mcp.ListResourcesRequest{}); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(res.Resources, func(r mcp.Resource) bool { return r.URI == doc }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resources/list never listed %s: %+v", doc, res.Resources)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, r := range res.Resources {
		if !strings.HasPrefix(r.URI, "demo://everything/") {
			t.Errorf("listed %s; want every upstream URI namespaced demo://everything/…", r.URI)
		}
	}

	// A text resource, read by its namespaced URI.
	read, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: doc}})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 {
		t.Fatalf("read %s: %+v", doc, read.Contents)
	}
	text, ok := read.Contents[0].(mcp.TextResourceContents)
	if !ok || text.URI != doc || text.MIMEType != "text/markdown" || len(text.Text) == 0 {
		t.Errorf("read %s: %+v; want its markdown under the namespaced URI", doc, read.Contents[0])
	}

	// Templates, and a blob read through one.
	tres, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var templates []string
	for _, tm := range tres.ResourceTemplates {
		if raw := tm.URITemplate.Raw(); strings.Contains(raw, "://everything/") { // not skills'
			templates = append(templates, raw)
		}
	}
	slices.Sort(templates)
	if diff := cmp.Diff([]string{"demo://everything/resource/dynamic/blob/{resourceId}", "demo://everything/resource/dynamic/text/{resourceId}"}, templates); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
	const blobURI = "demo://everything/resource/dynamic/blob/7"
	read, err = c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: blobURI}})
	if err != nil {
		t.Fatal(err)
	}
	blob, ok := read.Contents[0].(mcp.BlobResourceContents)
	if !ok || blob.URI != blobURI {
		t.Fatalf("read %s: %+v; want a blob", blobURI, read.Contents)
	}
	if b, err := base64.StdEncoding.DecodeString(blob.Blob); err != nil || !strings.Contains(string(b), "Resource 7") {
		t.Errorf("blob %q (%v); want resource 7's", b, err)
	}

	// Prompts, namespaced as tools are, got with arguments.
	pres, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var prompts []string
	for _, p := range pres.Prompts {
		prompts = append(prompts, p.Name)
	}
	for _, want := range []string{"everything_args-prompt", "everything_completable-prompt", "everything_simple-prompt"} {
		if !slices.Contains(prompts, want) {
			t.Errorf("prompts %v lack %s", prompts, want)
		}
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name, get.Params.Arguments = "everything_args-prompt", map[string]string{"city": "Paris", "state": "Texas"}
	pr, err := c.GetPrompt(ctx, get)
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Messages) != 1 || pr.Messages[0].Content.(mcp.TextContent).Text != "What's weather in Paris, Texas?" {
		t.Errorf("prompt: %+v", pr.Messages)
	}

	// Completions of a prompt's argument (with the context of another)
	// and of a template's.
	comp := mcp.CompleteRequest{}
	comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "everything_completable-prompt"}
	comp.Params.Argument.Name, comp.Params.Argument.Value = "name", "A"
	comp.Params.Context.Arguments = map[string]string{"department": "Engineering"}
	cres, err := c.Complete(ctx, comp)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Alice"}, cres.Completion.Values); diff != "" {
		t.Errorf("prompt completion (-want +got):\n%s", diff)
	}
	comp.Params.Ref = mcp.ResourceReference{Type: "ref/resource", URI: "demo://everything/resource/dynamic/text/{resourceId}"}
	comp.Params.Argument.Name, comp.Params.Argument.Value = "resourceId", "12"
	comp.Params.Context.Arguments = nil
	if cres, err = c.Complete(ctx, comp); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"12"}, cres.Completion.Values); diff != "" {
		t.Errorf("template completion (-want +got):\n%s", diff)
	}

	// A subscription: the upstream's update reaches the client under the
	// namespaced URI.
	if listen == nil {
		listen = func(uri string) {
			//lint:ignore SA1019 resources/subscribe is the 2025-11-25 session protocol's way, which this checks
			if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	listen(doc)
	call := mcp.CallToolRequest{}
	call.Params.Name = "everything_toggle-subscriber-updates"
	if _, err := c.CallTool(ctx, call); err != nil {
		t.Fatal(err)
	}
	n.wait(t, string(mcp.MethodNotificationResourceUpdated), func(p map[string]any) bool { return p["uri"] == doc })

	// A resource the upstream adds at run time: list_changed flows
	// through, and the new resource is listed and readable.
	call.Params.Name = "everything_gzip-file-as-resource"
	call.Params.Arguments = map[string]any{"name": "hello.gz", "data": "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte("hello")), "outputType": "resourceLink"}
	out, err := c.CallTool(ctx, call)
	if err != nil || out.IsError {
		t.Fatalf("gzip: %+v, %v", out, err)
	}
	// The tool's resource link names the resource as bub-mcp serves it.
	const added = "demo://everything/resource/session/hello.gz"
	if !slices.ContainsFunc(out.Content, func(c mcp.Content) bool { l, ok := c.(mcp.ResourceLink); return ok && l.URI == added }) {
		t.Errorf("gzip result %+v; want a resource link to %s", out.Content, added)
	}
	n.wait(t, string(mcp.MethodNotificationResourcesListChanged), nil)
	deadline = time.Now().Add(time.Minute)
	for {
		if res, err = c.ListResources(ctx, mcp.ListResourcesRequest{}); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(res.Resources, func(r mcp.Resource) bool { return r.URI == added }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never listed after list_changed", added)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if read, err = c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: added}}); err != nil {
		t.Fatal(err)
	}
	if b, ok := read.Contents[0].(mcp.BlobResourceContents); !ok || b.URI != added {
		t.Errorf("read %s: %+v", added, read.Contents)
	}
}

// checkBlind checks a client of a profile that cannot see the upstream's
// tools: it sees none of its resources, templates or prompts and can read,
// get and complete none of them.
func checkBlind(t *testing.T, c *client.Client) {
	ctx := t.Context()
	res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Resources {
		if strings.Contains(r.URI, "://everything/") {
			t.Errorf("blind profile lists %s", r.URI)
		}
	}
	tres, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range tres.ResourceTemplates {
		if strings.Contains(tm.URITemplate.Raw(), "://everything/") {
			t.Errorf("blind profile lists template %s", tm.URITemplate.Raw())
		}
	}
	pres, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pres.Prompts {
		if strings.HasPrefix(p.Name, "everything_") {
			t.Errorf("blind profile lists prompt %s", p.Name)
		}
	}
	if _, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "demo://everything/resource/static/document/architecture.md"}}); err == nil {
		t.Error("blind profile read an upstream resource")
	}
	if _, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "demo://everything/resource/dynamic/text/1"}}); err == nil {
		t.Error("blind profile read an upstream template's resource")
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name, get.Params.Arguments = "everything_args-prompt", map[string]string{"city": "Paris"}
	if _, err := c.GetPrompt(ctx, get); err == nil {
		t.Error("blind profile got an upstream prompt")
	}
	comp := mcp.CompleteRequest{}
	comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "everything_completable-prompt"}
	comp.Params.Argument.Name, comp.Params.Argument.Value = "department", "E"
	if cres, err := c.Complete(ctx, comp); err == nil && len(cres.Completion.Values) > 0 {
		t.Errorf("blind profile got completions %v", cres.Completion.Values)
	}
}

// serveProcess runs `bub-mcp serve` with the bub.toml src and args.
func serveProcess(t *testing.T, src string, args ...string) (home string, env []string) {
	t.Helper()
	home = t.TempDir()
	cfg := filepath.Join(home, "bub.toml")
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, append(os.Environ(), "BUB_HOME="+home, "BUB_CONFIG="+cfg)
}

// stdioServe is an initialized mcp-go client of `bub-mcp serve` over
// stdio, on the 2025-11-25 session protocol, with profile.
func stdioServe(t *testing.T, env []string, profile string) (*client.Client, *notes) {
	t.Helper()
	ws := t.TempDir()
	c := client.NewClient(transport.NewStdio(bubBinary(t), env, "serve", "--workspace", ws, "--profile", profile))
	n := newNotes(c)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "whole", Version: "1"}
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	return c, n
}

// The whole of server-everything through `bub-mcp serve` over stdio, on
// the 2025-11-25 session protocol, with its prompt get audited; a profile
// denied the upstream's tools sees none of the rest of it either.
func TestWholeServerStdio(t *testing.T) {
	home, env := serveProcess(t, wholeServerFile(t))
	c, n := stdioServe(t, env, "default")
	checkWholeServer(t, c, n, nil)
	// The prompt get is an audit record, with its arguments.
	if line := auditLine(t, home, "everything_args-prompt"); !strings.Contains(line, `"mode":"prompts/get"`) || !strings.Contains(line, `"city":"Paris"`) {
		t.Errorf("audit line %s; want the prompts/get with its arguments", line)
	}
	blind, _ := stdioServe(t, env, "blind")
	checkBlind(t, blind)
}

// The same over streamable HTTP on the sessionless 2026-07-28 protocol:
// subscriptions and list changes come on a subscriptions/listen stream.
func TestWholeServerSessionless(t *testing.T) {
	_, env := serveProcess(t, wholeServerFile(t))
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bubBinary(t), "serve", "--workspace", t.TempDir(), "--http", addr)
	cmd.Env = env
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never answered: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	modern := func(profile string) (*client.Client, *notes) {
		url := "http://" + addr + "/mcp"
		if profile != "default" {
			url += "/p/" + profile
		}
		tr, err := transport.NewStreamableHTTP(url)
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr)
		n := newNotes(c)
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
		if res.ProtocolVersion != mcp.ProtocolVersion20260728 {
			t.Fatalf("negotiated %s, not the sessionless protocol", res.ProtocolVersion)
		}
		return c, n
	}
	c, n := modern("default")
	checkWholeServer(t, c, n, func(uri string) {
		stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: []string{uri}, ResourcesListChanged: true, PromptsListChanged: true},
			func(err error) { t.Errorf("listen: %v", err) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		n.wait(t, mcp.MethodNotificationSubscriptionsAcknowledged, nil)
	})
	blind, _ := modern("blind")
	checkBlind(t, blind)
}

// A burst of notifications/resources/list_changed is one catalog reload
// in flight and at most one pending, as for tools; the catalog served in
// the end is the latest.
func TestResourceListChangedBurstIsCoalesced(t *testing.T) {
	const n = 2000
	h := newHost(t, fakeTable(t, "fake", "", "-app"), "")
	h.waitState(t, "fake", upstream.StateReady, nil)
	m, _ := upstream.FromApp(h.App)
	exts := m.MCPExtensions()
	if len(exts) != 1 || exts[0].Live == nil {
		t.Fatalf("extensions %+v; want one Live", exts)
	}
	if got := h.text(t, "fake.rburst", map[string]any{"n": n}); got != "generation "+strconv.Itoa(n) {
		t.Fatalf("rburst: %q", got)
	}
	want := "fake://fake/gen/" + strconv.Itoa(n)
	deadline := time.Now().Add(time.Minute)
	for {
		cat := exts[0].Live.Catalog()
		if slices.ContainsFunc(cat.Resources, func(r mcpserver.Resource) bool { return r.URI == want }) {
			if len(cat.Resources) != 1 {
				t.Errorf("catalog %+v; want the latest generation only", cat.Resources)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the catalog never listed %s: %+v", want, cat.Resources)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a pending reload, if any, has run
	lists, err := strconv.Atoi(h.text(t, "fake.rlists", map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	if lists > 8 {
		t.Errorf("%d notifications made %d resources/list requests; want at most 8", n, lists)
	}
}

// countingNotifier counts what a Live Extension tells its server.
type countingNotifier struct{ changed atomic.Int64 }

func (n *countingNotifier) Changed()       { n.changed.Add(1) }
func (n *countingNotifier) Updated(string) {}

// A hot reload that replaces an upstream takes its resources with it and
// brings the new one's, and the server is told.
func TestHotReloadCatalog(t *testing.T) {
	home := t.TempDir()
	conf := filepath.Join(home, "bub.toml")
	table := func(name string) string { return fakeTable(t, name, `pin = "off"`, "-app") }
	if err := os.WriteFile(conf, []byte(table("one")), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, table("one"), home)
	m, _ := upstream.FromApp(h.App)
	live := m.MCPExtensions()[0].Live
	n := &countingNotifier{}
	live.Start(n)
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { defer close(watched); m.Watch(ctx, 100*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-watched })
	has := func(uri string) bool {
		return slices.ContainsFunc(live.Catalog().Resources, func(r mcpserver.Resource) bool { return r.URI == uri })
	}
	waitFor(t, "one's resource", func() bool { return has("fake://one/gen/0") })
	before := n.changed.Load()
	if err := os.WriteFile(conf, []byte(table("two")), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two's resource instead of one's", func() bool {
		return has("fake://two/gen/0") && !has("fake://one/gen/0") && n.changed.Load() > before
	})
	for _, tm := range live.Catalog().Templates {
		if strings.Contains(tm.URITemplate, "://one/") {
			t.Errorf("removed upstream's template %s still served", tm.URITemplate)
		}
	}
}

// recordingNotifier records the resource updates a Live Extension tells.
type recordingNotifier struct {
	mu      sync.Mutex
	updated []string
}

func (n *recordingNotifier) Changed() {}
func (n *recordingNotifier) Updated(uri string) {
	n.mu.Lock()
	n.updated = append(n.updated, uri)
	n.mu.Unlock()
}

func (n *recordingNotifier) has(uri string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.updated, uri)
}

// A subscription outlives its upstream's connection: after a crash, and
// after a reload that restarts the upstream with new settings, the new
// connection subscribes again, and its updates still come.
func TestSubscriptionRenewedAfterRestart(t *testing.T) {
	home := t.TempDir()
	conf := filepath.Join(home, "bub.toml")
	if err := os.WriteFile(conf, []byte(everything(t, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, everything(t, ""), home)
	h.waitTool(t, "everything.toggle-subscriber-updates")
	m, _ := upstream.FromApp(h.App)
	live := m.MCPExtensions()[0].Live
	n := &recordingNotifier{}
	live.Start(n)
	const doc = "demo://everything/resource/static/document/architecture.md"
	if err := live.Subscribe(t.Context(), &providers.Connection{Transport: "test", Profile: h.conn.Profile}, doc); err != nil {
		t.Fatal(err)
	}
	first := h.status(t, "everything")
	if err := syscall.Kill(-first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.waitState(t, "everything", upstream.StateReady, func(s upstream.Status) bool { return s.Restarts == 1 })
	// The toggle starts the new process's updates for what is subscribed
	// on it (the first one sends at once).
	updated := func(what string) {
		t.Helper()
		waitFor(t, what, func() bool {
			if n.has(doc) {
				return true
			}
			if res := h.call(t.Context(), "everything.toggle-subscriber-updates", map[string]any{}); res.Err != nil {
				t.Fatal(res.Err)
			}
			return false
		})
	}
	updated("the update after the crash")

	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { defer close(watched); m.Watch(ctx, 100*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-watched })
	n.mu.Lock()
	n.updated = nil
	n.mu.Unlock()
	pid := h.status(t, "everything").PID
	if err := os.WriteFile(conf, []byte(everything(t, `env = { RESTARTED = "1" }`)), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restart by reload", func() bool {
		s := h.status(t, "everything")
		return s.State == upstream.StateReady && s.PID != pid && s.PID != 0
	})
	updated("the update after the reload")
}
