package auth

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/internal/hostcheck"
	"github.com/mark3labs/mcp-go/server"
)

// WellKnownPath is where RFC 9728 protected-resource metadata lives; a
// resource with a path serves it at WellKnownPath + path (§3.1).
const WellKnownPath = server.WellKnownProtectedResourcePath

// profileName is what may follow ProfilePathPrefix: the same names config
// accepts for profiles, and nothing that could change the path's meaning.
var profileName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })

// CanonicalURL returns u in the form clients compare resource identifiers
// in (RFC 9728 §3.3 compares exactly): lower-case scheme and host, no
// default port, no query or fragment, and "/" for an empty path — a client
// given https://host resolves it to https://host/, and VS Code refused a
// server whose metadata said https://host (metatool-ai/metamcp#122). A
// non-root path loses a trailing slash, as clients use the endpoint URL as
// typed (https://host/mcp). Only https is accepted, except http on a
// loopback host for tests and local use; key names the config key for
// errors.
func CanonicalURL(key, raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("auth: %s: %w", key, err)
	}
	if !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("auth: %s %q: want an absolute URL such as https://mcp.example.com", key, raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("auth: %s %q: must not have a query, fragment or user info", key, raw)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := u.Hostname(), u.Port()
	host = strings.ToLower(host)
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && hostcheck.Loopback(host):
	default:
		return "", fmt.Errorf("auth: %s %q: must be https (http only on a loopback host)", key, raw)
	}
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	u.Host = host
	if port != "" {
		u.Host += ":" + port
	}
	u.RawPath = ""
	if u.Path == "" {
		u.Path = "/"
	} else if len(u.Path) > 1 {
		u.Path = strings.TrimRight(u.Path, "/")
		if u.Path == "" {
			u.Path = "/"
		}
	}
	return u.String(), nil
}

// secureEndpoint refuses an endpoint a discovery document names that is
// not https (http on a loopback host only): the client secret and tokens
// go there, so a document must not be able to send them in the clear.
// Configured URLs are checked when the config is read.
func secureEndpoint(key, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("auth: the issuer's %s %q is not an absolute URL", key, raw)
	}
	if u.Scheme == "https" || (u.Scheme == "http" && hostcheck.Loopback(strings.ToLower(u.Hostname()))) {
		return nil
	}
	return fmt.Errorf("auth: the issuer's %s %q is not https", key, raw)
}

// sameResource compares two resource identifiers after canonicalisation.
func sameResource(a, b string) bool {
	ca, err1 := CanonicalURL("aud", a)
	cb, err2 := CanonicalURL("aud", b)
	return err1 == nil && err2 == nil && ca == cb
}

// join appends an absolute path to the canonical base URL.
func join(base, p string) string {
	if p == "/" || p == "" {
		return base
	}
	return strings.TrimRight(base, "/") + p
}

// ResourceFor returns the canonical resource identifier of the request path
// p (the endpoint, a profile's endpoint — <ProfilePathPrefix><profile> or
// /p/<profile><EndpointPath> — or the server root), and the profile a
// profile path asks for; ok is false for a path that is not one of this
// server's resources.
func (rs *ResourceServer) ResourceFor(p string) (resource, profile string, ok bool) {
	switch {
	case p == "" || p == "/":
		return rs.root, "", true
	case p == rs.opts.EndpointPath:
		return join(rs.root, p), "", true
	case strings.HasPrefix(p, rs.opts.ProfilePathPrefix):
		name := strings.TrimPrefix(p, rs.opts.ProfilePathPrefix)
		name = strings.TrimSuffix(name, "/")
		if !profileName().MatchString(name) {
			return "", "", false
		}
		return join(rs.root, rs.opts.ProfilePathPrefix+name), name, true
	case strings.HasPrefix(p, "/p/") && strings.HasSuffix(p, rs.opts.EndpointPath):
		// The older form bub-mcp also serves: /p/<profile>/mcp.
		name := strings.TrimSuffix(strings.TrimPrefix(p, "/p/"), rs.opts.EndpointPath)
		if !profileName().MatchString(name) {
			return "", "", false
		}
		return join(rs.root, "/p/"+name+rs.opts.EndpointPath), name, true
	}
	return "", "", false
}

// MetadataURL returns the RFC 9728 metadata URL for a resource path, the
// value of resource_metadata in challenges.
func (rs *ResourceServer) MetadataURL(p string) string {
	if p == "/" {
		p = ""
	}
	return rs.origin + WellKnownPath + rs.basePath + p
}

// metadata returns the RFC 9728 document for resource.
func (rs *ResourceServer) metadata(resource string) server.ProtectedResourceMetadataConfig {
	return server.ProtectedResourceMetadataConfig{
		Resource:               resource,
		AuthorizationServers:   []string{rs.opts.Issuer},
		ScopesSupported:        rs.opts.RequiredScopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           rs.opts.ResourceName,
	}
}

// MetadataHandler serves RFC 9728 protected-resource metadata: at
// WellKnownPath for the server root, and at WellKnownPath + path for the
// endpoint and each profile path (/.well-known/oauth-protected-resource/mcp,
// …/mcp/p/<profile>). Mount it at WellKnownPath and WellKnownPath + "/".
// Unknown paths get 404. The document is mcp-go's (CORS, no-store).
func (rs *ResourceServer) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, WellKnownPath)
		if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
			http.NotFound(w, r)
			return
		}
		// With a PublicURL under a prefix (https://host/base), a proxy that
		// keeps the prefix sends /.well-known/…/base/mcp.
		if rs.basePath != "" {
			rest = strings.TrimPrefix(rest, rs.basePath)
		}
		resource, _, ok := rs.ResourceFor(rest)
		if !ok {
			http.NotFound(w, r)
			return
		}
		server.NewProtectedResourceMetadataHandler(rs.metadata(resource)).ServeHTTP(w, r)
	})
}

// challenge builds the WWW-Authenticate value for a refusal on path p
// (RFC 6750 §3, RFC 9728 §5.1). Values are quoted; none carries a token.
func (rs *ResourceServer) challenge(p string, e *Error) string {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="`)
	b.WriteString(rs.MetadataURL(p))
	b.WriteByte('"')
	if len(rs.opts.RequiredScopes) > 0 {
		b.WriteString(`, scope="`)
		b.WriteString(strings.Join(rs.opts.RequiredScopes, " "))
		b.WriteByte('"')
	}
	if e != nil && e.Code != "" && e.Code != CodeAccessDenied {
		fmt.Fprintf(&b, `, error=%q`, e.Code)
		if e.Description != "" {
			fmt.Fprintf(&b, `, error_description=%q`, e.Description)
		}
	}
	return b.String()
}
