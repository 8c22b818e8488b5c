package mcpserver

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Live serves what an Extension offers that changes while the server
// runs (an upstream MCP server's resources, templates and prompts). The
// server takes its Catalog at New and again whenever the Extension says
// it changed, and tells clients of what changed
// (notifications/resources/list_changed,
// notifications/prompts/list_changed); an entry whose definition is the
// same keeps the Read or Get it first came with, so those should find
// their source by the request, not by the catalog they came in. It
// declares resources (with subscriptions and list changes), prompts (with
// list changes) and completions.
type Live struct {
	// Catalog is what the Extension offers now. Its resources and
	// templates of a URI scheme another Extension serves (skill://) are
	// left out: they would shadow that Extension's.
	Catalog func() Catalog
	// Visible, when set, says whether conn may see and use the entries of
	// group (Resource.Group, ResourceTemplate.Group, Prompt.Group): lists
	// leave out the rest, and reading or getting them fails as for an
	// unknown one. It is asked once per group and request.
	Visible func(ctx context.Context, conn *providers.Connection, group string) bool
	// Subscribe, when set, is asked each time a client subscribes to uri
	// (resources/subscribe, or a 2026-07-28 subscriptions/listen); an
	// error (a URI the Extension does not serve, or one the caller cannot
	// see) leaves the client unsubscribed. Unsubscribe is told when the
	// last subscriber of uri leaves.
	Subscribe   func(ctx context.Context, conn *providers.Connection, uri string) error
	Unsubscribe func(uri string)
	// Start, when set, is called once the server is built, with the
	// Notifier the Extension tells of changes.
	Start func(n Notifier)
}

// Catalog is a Live Extension's entries at one time.
type Catalog struct {
	Resources []Resource
	Templates []ResourceTemplate
	Prompts   []Prompt
}

// Notifier is how a Live Extension tells the server of changes.
type Notifier interface {
	// Changed says the Catalog changed: the server reads it again.
	Changed()
	// Updated says the resource uri changed: its subscribers are told
	// (notifications/resources/updated).
	Updated(uri string)
}

// liveEntry is what the server keeps of one Live entry to decide who sees it.
type liveEntry struct {
	live   *Live
	group  string
	hidden bool
}

// liveIndex is one state of every Live entry, by resource URI, URI
// template and prompt name; replaced, never changed.
type liveIndex struct {
	resources, templates, prompts map[string]liveEntry
}

// lives is the server's Live Extensions and the tables they put in mcp-go.
type lives struct {
	mu        sync.Mutex // serialises syncs
	exts      []*Extension
	static    []server.ServerResourceTemplate // templates of the other Extensions
	schemes   map[string]bool                 // URI schemes the other Extensions serve
	resources map[string]any                  // live URIs in mcp-go's table, and their definitions
	templates map[string]any                  // live URI templates in mcp-go's table, and theirs
	prompts   map[string]any                  // live prompt names in mcp-go's table, and theirs
	index     atomic.Pointer[liveIndex]

	// subMu serialises subscriptions, across the Extensions' Subscribe
	// and Unsubscribe; subs changes under notesMu too, which updated
	// takes alone: an upstream's notification reader calls it, and must
	// not wait for a Subscribe whose answer that reader has yet to read.
	subMu   sync.Mutex
	notesMu sync.Mutex
	subs    map[server.ClientSession]map[string]bool // a client's subscribed URIs
	count   map[string]int                           // subscribers per URI
	owner   map[string]*Live                         // the Live that accepted a URI's subscription
}

func (l *lives) load() *liveIndex {
	if p := l.index.Load(); p != nil {
		return p
	}
	return &liveIndex{}
}

// liveOptions are the SDK options Live Extensions need.
func liveOptions(exts []Extension) []server.ServerOption {
	for _, e := range exts {
		if e.Live != nil {
			return []server.ServerOption{
				server.WithResourceCapabilities(true, true),
				server.WithPromptCapabilities(true),
				server.WithCompletions(),
			}
		}
	}
	return nil
}

// visibleFunc answers, once per group within one request, whether the
// caller sees a Live entry.
func visibleFunc(ctx context.Context) func(e liveEntry) bool {
	seen := map[liveKey]bool{}
	return func(e liveEntry) bool {
		if e.live.Visible == nil {
			return true
		}
		k := liveKey{e.live, e.group}
		v, ok := seen[k]
		if !ok {
			v = e.live.Visible(ctx, ConnectionFromContext(ctx), e.group)
			seen[k] = v
		}
		return v
	}
}

type liveKey struct {
	live  *Live
	group string
}

// addLive wires the Live Extensions into s: their tables, the visibility
// of their entries, and resource subscriptions on both protocol eras.
func (s *Server) addLive(hooks *server.Hooks, exts []Extension) {
	l := &s.live
	for i := range exts {
		if exts[i].Live != nil {
			l.exts = append(l.exts, &exts[i])
		}
	}
	if len(l.exts) == 0 {
		return
	}
	l.schemes = map[string]bool{}
	for _, e := range exts {
		for _, t := range e.Templates {
			l.static = append(l.static, server.ServerResourceTemplate{Template: mcpTemplate(t), Handler: server.ResourceTemplateHandlerFunc(readHandler(t.Read))})
			l.schemes[uriScheme(t.URITemplate)] = true
		}
		for _, r := range e.Resources {
			l.schemes[uriScheme(r.URI)] = true
		}
	}
	hooks.AddAfterListResourceTemplates(func(ctx context.Context, id any, req *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
		idx, visible := l.load(), visibleFunc(ctx)
		kept := res.ResourceTemplates[:0]
		for _, t := range res.ResourceTemplates {
			if e, ok := idx.templates[t.URITemplate.Raw()]; ok && (e.hidden || !visible(e)) {
				continue
			}
			kept = append(kept, t)
		}
		res.ResourceTemplates = kept
	})
	hooks.AddBeforeSubscribe(func(ctx context.Context, id any, req *mcp.SubscribeRequest) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			l.subscribe(ctx, sess, req.Params.URI)
		}
	})
	hooks.AddBeforeUnsubscribe(func(ctx context.Context, id any, req *mcp.UnsubscribeRequest) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			l.unsubscribe(sess, req.Params.URI)
		}
	})
	hooks.AddBeforeSubscriptionsListen(func(ctx context.Context, id any, req *mcp.SubscriptionsListenRequest) {
		sess := server.ClientSessionFromContext(ctx)
		uris := req.Params.Notifications.ResourceSubscriptions
		if sess == nil || len(uris) == 0 {
			return
		}
		for _, uri := range uris {
			l.subscribe(ctx, sess, uri)
		}
		// The stream's subscriptions last as long as it does.
		go func() {
			<-ctx.Done()
			l.drop(sess)
		}()
	})
	hooks.AddOnUnregisterSession(func(ctx context.Context, sess server.ClientSession) { l.drop(sess) })
}

// startLive takes the Live Extensions' first catalogs and starts them.
func (s *Server) startLive() {
	if len(s.live.exts) == 0 {
		return
	}
	// Started first: a change while the first catalogs are read is
	// then told, not lost.
	for _, e := range s.live.exts {
		if e.Live.Start != nil {
			e.Live.Start(liveNotifier{s})
		}
	}
	s.syncLive()
}

// liveFilter is the prompt filter: Live prompts the caller may not see
// are left out of prompts/list and refused by prompts/get.
func (s *Server) liveFilter(ctx context.Context, in []mcp.Prompt) []mcp.Prompt {
	idx, visible := s.live.load(), visibleFunc(ctx)
	out := in[:0:0]
	for _, p := range in {
		if e, ok := idx.prompts[p.Name]; ok && !visible(e) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// liveResourceVisible reports whether the caller sees the listed resource
// uri (true for one no Live Extension serves).
func (s *Server) liveResourceVisible(visible func(liveEntry) bool, idx *liveIndex, uri string) bool {
	e, ok := idx.resources[uri]
	return !ok || visible(e)
}

type liveNotifier struct{ s *Server }

func (n liveNotifier) Changed()           { n.s.syncLive() }
func (n liveNotifier) Updated(uri string) { n.s.live.updated(uri) }

// guardRead refuses a read of an entry the caller cannot see, as for an
// unknown resource.
func guardRead(e liveEntry, read ReadFunc) ReadFunc {
	return func(ctx context.Context, conn *providers.Connection, req ReadRequest) ([]ResourceContents, error) {
		if e.live.Visible != nil && !e.live.Visible(ctx, conn, e.group) {
			return nil, server.ErrResourceNotFound
		}
		return read(ctx, conn, req)
	}
}

// syncLive brings mcp-go's tables in line with the Live catalogs; mcp-go
// tells clients of what changed.
func (s *Server) syncLive() {
	l := &s.live
	l.mu.Lock()
	defer l.mu.Unlock()
	idx := &liveIndex{resources: map[string]liveEntry{}, templates: map[string]liveEntry{}, prompts: map[string]liveEntry{}}
	var resources []server.ServerResource
	var templates []server.ServerResourceTemplate
	var prompts []server.ServerPrompt
	var all []server.ServerResourceTemplate // every live template, for a table set anew
	defs := struct{ resources, templates, prompts map[string]any }{map[string]any{}, map[string]any{}, map[string]any{}}
	for _, e := range l.exts {
		cat := e.Live.Catalog()
		for _, r := range cat.Resources {
			if l.schemes[uriScheme(r.URI)] {
				continue // the server's own: a Live entry may not shadow it
			}
			le := liveEntry{live: e.Live, group: r.Group}
			idx.resources[r.URI] = le
			def := resourceDef{r.ResourceInfo, r.Group}
			if defs.resources[r.URI] = def; !reflect.DeepEqual(l.resources[r.URI], def) {
				resources = append(resources, server.ServerResource{Resource: mcpResource(r.ResourceInfo), Handler: readHandler(guardRead(le, r.Read))})
			}
		}
		for _, t := range cat.Templates {
			if l.schemes[uriScheme(t.URITemplate)] {
				continue
			}
			le := liveEntry{live: e.Live, group: t.Group, hidden: t.Hidden}
			idx.templates[t.URITemplate] = le
			def := t
			def.Read = nil
			entry := server.ServerResourceTemplate{Template: mcpTemplate(t), Handler: server.ResourceTemplateHandlerFunc(readHandler(guardRead(le, t.Read)))}
			all = append(all, entry)
			if defs.templates[t.URITemplate] = def; !reflect.DeepEqual(l.templates[t.URITemplate], def) {
				templates = append(templates, entry)
			}
		}
		for _, p := range cat.Prompts {
			idx.prompts[p.Name] = liveEntry{live: e.Live, group: p.Group}
			def := p
			def.Get = nil
			if defs.prompts[p.Name] = def; !reflect.DeepEqual(l.prompts[p.Name], def) {
				prompts = append(prompts, server.ServerPrompt{Prompt: mcpPrompt(p), Handler: promptHandler(p.Get)})
			}
		}
	}
	// Additions first, then the index, then removals: a listed entry is
	// always one mcp-go can serve.
	if len(resources) > 0 {
		s.mcp.AddResources(resources...)
	}
	var goneResources []string
	for uri := range l.resources {
		if _, ok := idx.resources[uri]; !ok {
			goneResources = append(goneResources, uri)
		}
	}
	l.resources = defs.resources
	removedTemplates := false
	for t := range l.templates {
		if _, ok := idx.templates[t]; !ok {
			removedTemplates = true
		}
	}
	if removedTemplates {
		// mcp-go cannot delete one template: the table is set anew.
		s.mcp.SetResourceTemplates(append(slices.Clip(l.static), all...)...)
	} else if len(templates) > 0 {
		s.mcp.AddResourceTemplates(templates...)
	}
	l.templates = defs.templates
	if len(prompts) > 0 {
		s.mcp.AddPrompts(prompts...)
	}
	var gonePrompts []string
	for name := range l.prompts {
		if _, ok := idx.prompts[name]; !ok {
			gonePrompts = append(gonePrompts, name)
		}
	}
	l.prompts = defs.prompts
	l.index.Store(idx)
	if len(goneResources) > 0 {
		s.mcp.DeleteResources(goneResources...)
	}
	if len(gonePrompts) > 0 {
		s.mcp.DeletePrompts(gonePrompts...)
	}
}

// uriScheme is uri's scheme, lower-cased ("" for none).
func uriScheme(uri string) string {
	scheme, _, ok := strings.Cut(uri, ":")
	if !ok {
		return ""
	}
	return strings.ToLower(scheme)
}

// resourceDef is what makes a Live resource's listing: a change of it is
// a change of the list.
type resourceDef struct {
	info  ResourceInfo
	group string
}

// subscribe records sess's subscription to uri, asking the Live
// Extensions first (each new subscriber: whether one may subscribe is
// the caller's, not the URI's).
func (l *lives) subscribe(ctx context.Context, sess server.ClientSession, uri string) {
	l.subMu.Lock()
	defer l.subMu.Unlock()
	if l.subs[sess][uri] {
		return
	}
	var owner *Live
	for _, e := range l.exts {
		if e.Live.Subscribe != nil && e.Live.Subscribe(ctx, ConnectionFromContext(ctx), uri) == nil {
			owner = e.Live
			break
		}
	}
	if owner == nil {
		return
	}
	if l.owner == nil {
		l.owner, l.count = map[string]*Live{}, map[string]int{}
	}
	l.owner[uri] = owner
	l.count[uri]++
	l.notesMu.Lock()
	defer l.notesMu.Unlock()
	if l.subs == nil {
		l.subs = map[server.ClientSession]map[string]bool{}
	}
	if l.subs[sess] == nil {
		l.subs[sess] = map[string]bool{}
	}
	l.subs[sess][uri] = true
}

// unsubscribe ends sess's subscription to uri.
func (l *lives) unsubscribe(sess server.ClientSession, uri string) {
	l.subMu.Lock()
	defer l.subMu.Unlock()
	if !l.subs[sess][uri] {
		return
	}
	l.notesMu.Lock()
	delete(l.subs[sess], uri)
	if len(l.subs[sess]) == 0 {
		delete(l.subs, sess)
	}
	l.notesMu.Unlock()
	l.release(uri)
}

// drop ends every subscription of sess (its session or stream ended).
func (l *lives) drop(sess server.ClientSession) {
	l.subMu.Lock()
	defer l.subMu.Unlock()
	l.notesMu.Lock()
	uris := l.subs[sess]
	delete(l.subs, sess)
	l.notesMu.Unlock()
	for uri := range uris {
		l.release(uri)
	}
}

// release counts one subscriber of uri gone; under subMu.
func (l *lives) release(uri string) {
	if l.count[uri]--; l.count[uri] > 0 {
		return
	}
	delete(l.count, uri)
	if owner := l.owner[uri]; owner != nil && owner.Unsubscribe != nil {
		owner.Unsubscribe(uri)
	}
	delete(l.owner, uri)
}

// updated tells uri's subscribers it changed. A client whose queue is full
// misses it, as mcp-go's own notifications do.
func (l *lives) updated(uri string) {
	l.notesMu.Lock()
	var to []server.ClientSession
	for sess, uris := range l.subs {
		if uris[uri] {
			to = append(to, sess)
		}
	}
	l.notesMu.Unlock()
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: mcp.MethodNotificationResourceUpdated,
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"uri": uri}},
	}}
	for _, sess := range to {
		select {
		case sess.NotificationChannel() <- n:
		default:
		}
	}
}
