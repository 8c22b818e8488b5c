package upstream

import (
	"maps"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// An upstream's resource URIs are namespaced by the upstream's name, which
// becomes their authority: scheme://host/path of upstream "docs" is
// scheme://docs/host/path, and file:///etc/x is file://docs//etc/x. The
// scheme stays, so an MCP App's ui://widget/app.html stays a ui:// URI
// (ui://docs/widget/app.html), as hosts require; the name routes a read
// back to its upstream, and removing it gives the upstream's URI again.
// Upstream names are [a-zA-Z0-9_-]{1,32}, valid as a URI authority.
// URIs without "scheme://" (urn:, data:) cannot be namespaced so and are
// not passed through.

// exposedURI is the URI clients see for upstream server's uri (or URI
// template), and whether it has one.
func exposedURI(server, uri string) (string, bool) {
	scheme, rest, ok := splitScheme(uri)
	if !ok {
		return "", false
	}
	return scheme + "://" + server + "/" + rest, true
}

// originalURI is the upstream's own URI for an exposed one, and the
// upstream's name.
func originalURI(exposed string) (server, uri string, ok bool) {
	scheme, rest, ok := splitScheme(exposed)
	if !ok {
		return "", "", false
	}
	server, rest, ok = strings.Cut(rest, "/")
	if !ok || server == "" {
		return "", "", false
	}
	return server, scheme + "://" + rest, true
}

// splitScheme splits uri at its "://" after a valid scheme (RFC 3986:
// ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )).
func splitScheme(uri string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(uri, "://")
	if !ok || scheme == "" {
		return "", "", false
	}
	for i, r := range scheme {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return "", "", false
		}
	}
	return scheme, rest, true
}

// exposedUIMeta rewrites an MCP App tool's _meta (SEP-1865): the ui://
// resource it names (ui.resourceUri, and the older flat "ui/resourceUri")
// is the one clients read through bub-mcp. meta is not changed; nil when
// there is nothing to rewrite.
func exposedUIMeta(server string, meta map[string]any) map[string]any {
	var out map[string]any
	clone := func() {
		if out == nil {
			out = maps.Clone(meta)
		}
	}
	if ui, ok := meta["ui"].(map[string]any); ok {
		if uri, ok := ui["resourceUri"].(string); ok {
			if x, ok := exposedURI(server, uri); ok {
				clone()
				nui := maps.Clone(ui)
				nui["resourceUri"] = x
				out["ui"] = nui
			}
		}
	}
	if uri, ok := meta["ui/resourceUri"].(string); ok {
		if x, ok := exposedURI(server, uri); ok {
			clone()
			out["ui/resourceUri"] = x
		}
	}
	return out
}

// exposedToolMeta is a tool's _meta with its MCP App resource URI
// namespaced (exposedUIMeta); meta itself is not changed.
func exposedToolMeta(server string, meta *mcp.Meta) *mcp.Meta {
	if meta == nil {
		return nil
	}
	fields := exposedUIMeta(server, meta.AdditionalFields)
	if fields == nil {
		return meta
	}
	out := *meta
	out.AdditionalFields = fields
	return &out
}

// exposeResultURIs namespaces the resource URIs in an upstream tool's
// result (resource links and embedded resources), so that a client reads
// them through bub-mcp; text parts are not touched.
func exposeResultURIs(server string, r *mcp.CallToolResult) {
	expose := func(uri *string) {
		if x, ok := exposedURI(server, *uri); ok {
			*uri = x
		}
	}
	exposeContents := func(rc mcp.ResourceContents) mcp.ResourceContents {
		switch x := rc.(type) {
		case mcp.TextResourceContents:
			expose(&x.URI)
			return x
		case *mcp.TextResourceContents:
			y := *x
			expose(&y.URI)
			return &y
		case mcp.BlobResourceContents:
			expose(&x.URI)
			return x
		case *mcp.BlobResourceContents:
			y := *x
			expose(&y.URI)
			return &y
		}
		return rc
	}
	for i, c := range r.Content {
		switch x := c.(type) {
		case mcp.ResourceLink:
			expose(&x.URI)
			r.Content[i] = x
		case *mcp.ResourceLink:
			y := *x
			expose(&y.URI)
			r.Content[i] = &y
		case mcp.EmbeddedResource:
			x.Resource = exposeContents(x.Resource)
			r.Content[i] = x
		case *mcp.EmbeddedResource:
			y := *x
			y.Resource = exposeContents(y.Resource)
			r.Content[i] = &y
		}
	}
}
