package upstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// This file passes the rest of an upstream server through: its resources,
// resource templates and prompts appear namespaced by the upstream's name
// (uri.go; prompts as "<server>_<prompt>", the model form of a tool's
// name), read, got and completed through the upstream, subscribed to on
// both protocol eras, and listed anew when the upstream says its lists
// changed. A caller sees an upstream's resources, templates and prompts
// when its View offers at least one of that upstream's tools (listed,
// deferred or in run_code): the profile's tools/deny globs and the
// upstream's own tools/deny decide both alike.

// Bounds on what an upstream's lists may bring.
const (
	maxCatalogPages   = 100
	maxCatalogEntries = 5000
)

// catalog is an upstream's resources, templates and prompts as it listed
// them, and the resources subscribed to on it.
type catalog struct {
	mu        sync.Mutex
	resources []mcp.Resource
	templates []json.RawMessage // mcp.ResourceTemplate fails to decode templates it cannot parse
	prompts   []mcp.Prompt
	subs      map[string]bool // the upstream's URIs bub-mcp subscribed to
	// refresh coalesces list changes as tools' do.
	refresh refresher
}

// MCPExtensions serves the upstreams' resources, templates and prompts
// over MCP. A one-shot command (bub-mcp call) serves no MCP clients.
func (m *Module) MCPExtensions() []mcpserver.Extension {
	if m.cancel == nil || m.app.OnDemand() {
		return nil
	}
	return []mcpserver.Extension{{
		Complete: m.complete,
		Live: &mcpserver.Live{
			Catalog:     m.liveCatalog,
			Visible:     m.visible,
			Subscribe:   m.subscribe,
			Unsubscribe: m.unsubscribe,
			Start: func(n mcpserver.Notifier) {
				m.notifyMu.Lock()
				m.notifiers = append(m.notifiers, n)
				m.notifyMu.Unlock()
			},
		},
	}}
}

// notify is the started servers' Notifiers.
func (m *Module) notify() []mcpserver.Notifier {
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	return slices.Clone(m.notifiers)
}

// catalogChanged tells the servers the upstreams' catalogs changed.
func (m *Module) catalogChanged() {
	for _, n := range m.notify() {
		n.Changed()
	}
}

// liveByName is the current upstream of that name (case-insensitive, as
// a URI's authority is), if it is not closed.
func (m *Module) liveByName(name string) *upstream {
	for _, u := range m.list() {
		if strings.EqualFold(u.cfg.name, name) {
			u.mu.Lock()
			closed := u.closed
			u.mu.Unlock()
			if closed {
				return nil
			}
			return u
		}
	}
	return nil
}

// promptName is the name clients see for an upstream's prompt.
func promptName(server, prompt string) string {
	return registry.ModelName(RuntimeName(server, prompt))
}

// liveCatalog is every upstream's entries, namespaced.
func (m *Module) liveCatalog() mcpserver.Catalog {
	var out mcpserver.Catalog
	for _, u := range m.list() {
		u.mu.Lock()
		closed := u.closed
		u.mu.Unlock()
		if closed {
			continue
		}
		name := u.cfg.name
		// Every URI of the upstream routes back to it, listed or not (an
		// MCP App's ui:// resource is named only by its tool's _meta), by
		// one unlisted template per scheme it uses.
		schemes := map[string]bool{"ui": true}
		c := &u.catalog
		c.mu.Lock()
		for _, r := range c.resources {
			uri, ok := exposedURI(name, r.URI)
			if !ok {
				continue
			}
			scheme, _, _ := splitScheme(r.URI)
			schemes[strings.ToLower(scheme)] = true
			info := mcpserver.ResourceInfo{URI: uri, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType}
			if r.Meta != nil {
				info.Meta = r.Meta.AdditionalFields
			}
			out.Resources = append(out.Resources, mcpserver.Resource{ResourceInfo: info, Read: m.read, Group: name})
		}
		for _, raw := range c.templates {
			var t struct {
				URITemplate string `json:"uriTemplate"`
				Name        string `json:"name"`
				Description string `json:"description"`
				MIMEType    string `json:"mimeType"`
			}
			if json.Unmarshal(raw, &t) != nil {
				continue
			}
			tmpl, ok := exposedURI(name, t.URITemplate)
			if !ok { // splitScheme refuses a scheme that is a variable
				continue
			}
			scheme, _, _ := splitScheme(t.URITemplate)
			schemes[strings.ToLower(scheme)] = true
			out.Templates = append(out.Templates, mcpserver.ResourceTemplate{URITemplate: tmpl, Name: t.Name, Description: t.Description, MIMEType: t.MIMEType, Read: m.read, Group: name})
		}
		for _, p := range c.prompts {
			mp := mcpserver.Prompt{Name: promptName(name, p.Name), Description: p.Description, Get: m.getPrompt, Group: name}
			for _, a := range p.Arguments {
				mp.Arguments = append(mp.Arguments, mcpserver.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
			}
			out.Prompts = append(out.Prompts, mp)
		}
		c.mu.Unlock()
		for _, scheme := range slices.Sorted(maps.Keys(schemes)) {
			out.Templates = append(out.Templates, mcpserver.ResourceTemplate{
				URITemplate: scheme + "://" + name + "/{+path}", Name: name + "-resources", Read: m.read, Group: name, Hidden: true})
		}
	}
	return out
}

// visible reports whether conn's View offers a tool of upstream group.
func (m *Module) visible(ctx context.Context, conn *providers.Connection, group string) bool {
	if err := m.app.Resolve(ctx, conn); err != nil {
		return false
	}
	v, err := m.app.View(ctx, conn)
	if err != nil {
		return false
	}
	servers := v.Memo(viewServersKey{}, func() any {
		set := map[string]bool{}
		for _, ts := range [][]*registry.Tool{v.Tools, v.Deferred, v.CodeTools} {
			for _, t := range ts {
				if _, ok := t.Source.(definition); ok {
					if server, _, ok := strings.Cut(t.Name, "."); ok {
						set[strings.ToLower(server)] = true
					}
				}
			}
		}
		return set
	}).(map[string]bool)
	return servers[strings.ToLower(group)]
}

// viewServersKey keys, in a View's memo, the upstreams it offers tools of.
type viewServersKey struct{}

// errNotFound is what a caller gets for a resource or prompt it cannot
// see, as for one that does not exist.
func errNotFound(what string) error {
	return &mcpserver.MethodError{Code: mcpserver.CodeInvalidParams, Message: what + " not found"}
}

// request sends one request of conn's to the upstream, over the
// connection its calls go over (sessionFor), and returns its raw result,
// within the upstream's timeout.
func (u *upstream) request(ctx context.Context, conn *providers.Connection, method string, params any) (json.RawMessage, error) {
	s, principal, release, err := u.sessionFor(ctx, nil, conn)
	if err != nil {
		return nil, err
	}
	raw, err := u.requestOn(ctx, s, method, params)
	release()
	if principal != "" && errors.Is(err, transport.ErrOAuthAuthorizationRequired) {
		// Signed out elsewhere, or a token no refresh helps: as for a
		// call, this principal signs in again.
		u.pool.drop(principal)
		return nil, u.loginRequired(principal)
	}
	return raw, err
}

func (u *upstream) requestOn(ctx context.Context, s *session, method string, params any) (json.RawMessage, error) {
	cctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout.Duration)
	defer cancel()
	id := mcp.NewRequestId("bub-" + strings.ReplaceAll(method, "/", "-") + "-" + strconv.FormatInt(u.seq.Add(1), 10))
	resp, err := s.c.GetTransport().SendRequest(cctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %s: %w", u.cfg.name, method, hideURL(err, u.cfg.URL))
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("upstream %s: %s: %w", u.cfg.name, method, resp.Error.AsError())
	}
	return resp.Result, nil
}

// read reads a resource through the upstream its URI names (the current
// one of that name: a reload may have replaced it).
func (m *Module) read(ctx context.Context, conn *providers.Connection, req mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
	server, _, ok := originalURI(req.URI)
	u := m.liveByName(server)
	if !ok || u == nil {
		return nil, errNotFound("resource " + req.URI)
	}
	return u.read(ctx, conn, req)
}

// getPrompt gets a prompt through the upstream that lists it now.
func (m *Module) getPrompt(ctx context.Context, conn *providers.Connection, req *mcpserver.PromptRequest) (*mcpserver.PromptResult, error) {
	for _, u := range m.list() {
		if _, ok := u.originalPrompt(req.Name); ok {
			return u.getPrompt(ctx, conn, req)
		}
	}
	return nil, errNotFound("prompt " + req.Name)
}

// read reads a resource through the upstream, with its URIs mapped both
// ways, and audits it.
func (u *upstream) read(ctx context.Context, conn *providers.Connection, req mcpserver.ReadRequest) (out []mcpserver.ResourceContents, err error) {
	start := time.Now()
	defer func() { u.m.audit(ctx, conn, "resources/read", req.URI, nil, start, err) }()
	server, uri, ok := originalURI(req.URI)
	if !ok || !strings.EqualFold(server, u.cfg.name) {
		return nil, errNotFound("resource " + req.URI)
	}
	raw, err := u.request(ctx, conn, string(mcp.MethodResourcesRead), map[string]any{"uri": uri})
	if err != nil {
		return nil, err
	}
	var res struct {
		Contents []struct {
			URI      string         `json:"uri"`
			MIMEType string         `json:"mimeType"`
			Text     *string        `json:"text"`
			Blob     *string        `json:"blob"`
			Meta     map[string]any `json:"_meta"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("upstream %s: resources/read: %w", u.cfg.name, err)
	}
	for _, c := range res.Contents {
		x, ok := exposedURI(u.cfg.name, c.URI)
		if !ok {
			x = req.URI
		}
		part := mcpserver.ResourceContents{URI: x, MIMEType: c.MIMEType, Meta: c.Meta}
		switch {
		case c.Blob != nil:
			b, err := base64.StdEncoding.DecodeString(*c.Blob)
			if err != nil {
				return nil, fmt.Errorf("upstream %s: resources/read %s: blob: %w", u.cfg.name, c.URI, err)
			}
			part.Blob = b
		case c.Text != nil:
			part.Text = *c.Text
		}
		out = append(out, part)
	}
	return out, nil
}

// getPrompt gets a prompt through the upstream, and audits it.
func (u *upstream) getPrompt(ctx context.Context, conn *providers.Connection, req *mcpserver.PromptRequest) (res *mcpserver.PromptResult, err error) {
	start := time.Now()
	args, _ := json.Marshal(req.Arguments)
	defer func() { u.m.audit(ctx, conn, "prompts/get", req.Name, args, start, err) }()
	name, ok := u.originalPrompt(req.Name)
	if !ok {
		return nil, errNotFound("prompt " + req.Name)
	}
	params := map[string]any{"name": name}
	if len(req.Arguments) > 0 {
		params["arguments"] = req.Arguments
	}
	raw, err := u.request(ctx, conn, string(mcp.MethodPromptsGet), params)
	if err != nil {
		return nil, err
	}
	var r struct {
		Description string `json:"description"`
		Messages    []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("upstream %s: prompts/get: %w", u.cfg.name, err)
	}
	res = &mcpserver.PromptResult{Description: r.Description}
	for _, msg := range r.Messages {
		c, err := u.promptContent(msg.Content)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: prompts/get %s: %w", u.cfg.name, name, err)
		}
		res.Messages = append(res.Messages, mcpserver.PromptMessage{Role: msg.Role, Content: c})
	}
	return res, nil
}

// promptContent maps one prompt message's content, with an embedded
// resource's URI namespaced.
func (u *upstream) promptContent(raw json.RawMessage) (registry.Content, error) {
	var c struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     string `json:"data"`
		MIMEType string `json:"mimeType"`
		URI      string `json:"uri"`
		Name     string `json:"name"`
		Resource *struct {
			URI      string  `json:"uri"`
			MIMEType string  `json:"mimeType"`
			Text     string  `json:"text"`
			Blob     *string `json:"blob"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return registry.Content{}, err
	}
	switch c.Type {
	case "text":
		return registry.Content{Type: "text", Text: c.Text}, nil
	case "image", "audio":
		b, err := base64.StdEncoding.DecodeString(c.Data)
		if err != nil {
			return registry.Content{}, fmt.Errorf("%s data: %w", c.Type, err)
		}
		return registry.Content{Type: c.Type, Data: b, MIMEType: c.MIMEType}, nil
	case "resource":
		if c.Resource == nil {
			return registry.Content{}, errors.New("an embedded resource without its resource")
		}
		uri, ok := exposedURI(u.cfg.name, c.Resource.URI)
		if !ok {
			uri = c.Resource.URI
		}
		out := registry.Content{Type: "resource", URI: uri, MIMEType: c.Resource.MIMEType, Text: c.Resource.Text}
		if c.Resource.Blob != nil {
			b, err := base64.StdEncoding.DecodeString(*c.Resource.Blob)
			if err != nil {
				return registry.Content{}, fmt.Errorf("resource blob: %w", err)
			}
			out.Data = b
		}
		return out, nil
	case "resource_link":
		uri, ok := exposedURI(u.cfg.name, c.URI)
		if !ok {
			uri = c.URI
		}
		return registry.Content{Type: "text", Text: fmt.Sprintf("[resource link %s: %s]", uri, c.Name)}, nil
	}
	return registry.Content{Type: "text", Text: string(raw)}, nil
}

// originalPrompt is the upstream's name of the prompt clients call name.
func (u *upstream) originalPrompt(name string) (string, bool) {
	c := &u.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.prompts {
		if promptName(u.cfg.name, p.Name) == name {
			return p.Name, true
		}
	}
	return "", false
}

// complete forwards completion/complete to the upstream whose prompt or
// resource template the request names.
func (m *Module) complete(ctx context.Context, conn *providers.Connection, req mcpserver.CompleteRequest) ([]string, error) {
	var u *upstream
	ref := map[string]any{}
	if req.Resource != "" {
		server, uri, ok := originalURI(req.Resource)
		if u = m.liveByName(server); !ok || u == nil {
			return nil, nil
		}
		ref["type"], ref["uri"] = "ref/resource", uri
	} else {
		for _, x := range m.list() {
			if name, ok := x.originalPrompt(req.Prompt); ok {
				u = x
				ref["type"], ref["name"] = "ref/prompt", name
				break
			}
		}
		if u == nil {
			return nil, nil
		}
	}
	if !m.visible(ctx, conn, u.cfg.name) {
		return nil, nil
	}
	params := map[string]any{"ref": ref, "argument": map[string]any{"name": req.Argument, "value": req.Value}}
	if len(req.Context) > 0 {
		params["context"] = map[string]any{"arguments": req.Context}
	}
	raw, err := u.request(ctx, conn, string(mcp.MethodCompletionComplete), params)
	if err != nil {
		return nil, err
	}
	var res struct {
		Completion struct {
			Values []string `json:"values"`
		} `json:"completion"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("upstream %s: completion/complete: %w", u.cfg.name, err)
	}
	return res.Completion.Values, nil
}

// subscribe subscribes the caller to an upstream resource: bub-mcp
// subscribes once on the upstream, however many clients do.
func (m *Module) subscribe(ctx context.Context, conn *providers.Connection, exposed string) error {
	server, uri, ok := originalURI(exposed)
	if !ok {
		return errNotFound("resource " + exposed)
	}
	u := m.liveByName(server)
	if u == nil || !m.visible(ctx, conn, u.cfg.name) {
		return errNotFound("resource " + exposed)
	}
	c := &u.catalog
	c.mu.Lock()
	done := c.subs[uri]
	c.mu.Unlock()
	if done {
		return nil
	}
	if _, err := u.request(ctx, conn, string(mcp.MethodResourcesSubscribe), map[string]any{"uri": uri}); err != nil {
		return err
	}
	c.mu.Lock()
	if c.subs == nil {
		c.subs = map[string]bool{}
	}
	c.subs[uri] = true
	c.mu.Unlock()
	return nil
}

// unsubscribe ends bub-mcp's subscription on the upstream once no client
// is subscribed.
func (m *Module) unsubscribe(exposed string) {
	server, uri, ok := originalURI(exposed)
	u := m.liveByName(server)
	if !ok || u == nil {
		return
	}
	c := &u.catalog
	c.mu.Lock()
	was := c.subs[uri]
	delete(c.subs, uri)
	c.mu.Unlock()
	if !was {
		return
	}
	u.mu.Lock()
	s := u.cur
	u.mu.Unlock()
	if s == nil || !s.alive() {
		return
	}
	if _, err := u.requestOn(u.ctx, s, string(mcp.MethodResourcesUnsubscribe), map[string]any{"uri": uri}); err != nil {
		u.m.log.Debug("upstream.unsubscribe", "upstream", u.cfg.name, "error", err)
	}
}

// inheritSubscriptions takes the resource subscriptions of the server of
// u's name among gone (a reload restarting it), which u makes on its
// first connection, as a reconnection does.
func (u *upstream) inheritSubscriptions(gone []*upstream) {
	for _, g := range gone {
		if g.cfg.name != u.cfg.name {
			continue
		}
		g.catalog.mu.Lock()
		subs := g.catalog.subs
		g.catalog.subs = nil
		g.catalog.mu.Unlock()
		u.catalog.mu.Lock()
		u.catalog.subs = subs
		u.catalog.mu.Unlock()
	}
}

// updated passes an upstream's notifications/resources/updated on to the
// clients subscribed to it.
func (u *upstream) updated(uri string) {
	x, ok := exposedURI(u.cfg.name, uri)
	if !ok {
		return
	}
	for _, n := range u.m.notify() {
		n.Updated(x)
	}
}

// catalogChanged reloads the upstream's resources, templates and prompts
// from s, coalesced as tool lists are (refresher).
func (u *upstream) catalogChanged(s *session) {
	u.catalog.refresh.ask(s, &u.m.wg, u.m.stopping, u.loadCatalog)
}

// loadCatalog lists what the upstream's capabilities say it has, renews
// bub-mcp's subscriptions on a new session, and tells the server.
func (u *upstream) loadCatalog(s *session) {
	ctx, cancel := context.WithTimeout(u.ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	caps := s.c.GetServerCapabilities()
	var resources []mcp.Resource
	var templates []json.RawMessage
	var prompts []mcp.Prompt
	var errs []error
	if caps.Resources != nil {
		var err error
		if resources, err = listAll[mcp.Resource](ctx, u, s, string(mcp.MethodResourcesList), "resources"); err != nil {
			errs = append(errs, err)
		}
		if templates, err = listAll[json.RawMessage](ctx, u, s, string(mcp.MethodResourcesTemplatesList), "resourceTemplates"); err != nil {
			errs = append(errs, err)
		}
	}
	if caps.Prompts != nil {
		var err error
		if prompts, err = listAll[mcp.Prompt](ctx, u, s, string(mcp.MethodPromptsList), "prompts"); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil && u.m.ctx.Err() == nil && s.alive() {
		u.m.log.Warn("upstream.catalog", "upstream", u.cfg.name, "error", err)
	}
	c := &u.catalog
	c.mu.Lock()
	c.resources, c.templates, c.prompts = resources, templates, prompts
	subs := slices.Sorted(maps.Keys(c.subs))
	c.mu.Unlock()
	if caps.Resources != nil && caps.Resources.Subscribe {
		// A new session knows nothing of the old one's subscriptions.
		for _, uri := range subs {
			if _, err := u.requestOn(ctx, s, string(mcp.MethodResourcesSubscribe), map[string]any{"uri": uri}); err != nil {
				u.m.log.Warn("upstream.resubscribe", "upstream", u.cfg.name, "error", err)
			}
		}
	}
	u.m.catalogChanged()
}

// listAll reads every page of a list method's field, bounded.
func listAll[T any](ctx context.Context, u *upstream, s *session, method, field string) ([]T, error) {
	var out []T
	cursor := ""
	for range maxCatalogPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := u.requestOn(ctx, s, method, params)
		if err != nil {
			return nil, err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var items []T
		if err := json.Unmarshal(page[field], &items); err != nil && page[field] != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		out = append(out, items...)
		if len(out) > maxCatalogEntries {
			return nil, fmt.Errorf("%s: more than %d entries", method, maxCatalogEntries)
		}
		var next string
		if page["nextCursor"] != nil {
			_ = json.Unmarshal(page["nextCursor"], &next)
		}
		if next == "" || next == cursor {
			return out, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("%s: more than %d pages", method, maxCatalogPages)
}

// audit records a resource read or prompt get through an upstream.
func (m *Module) audit(ctx context.Context, conn *providers.Connection, method, name string, args json.RawMessage, start time.Time, err error) {
	c := *conn
	_ = m.app.Resolve(ctx, &c) // the session key; an unknown profile has none
	r := audit.Record{Time: start, Principal: c.Principal, PrincipalName: c.PrincipalName, Profile: c.Profile, Transport: c.Transport,
		Session: c.SessionKey, Mode: method, Tool: name, Args: args, Outcome: "ok", Duration: time.Since(start)}
	if c.ClientName != "" {
		r.Client = c.ClientName + "/" + c.ClientVersion
	}
	if err != nil {
		r.Outcome, r.Error = "error", err.Error()
	}
	m.app.Audit(r)
}
