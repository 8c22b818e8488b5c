package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/registry"
)

// web.fetch's defaults.
const (
	// DefaultWebTimeout is web.fetch's timeout in seconds when the call
	// gives none.
	DefaultWebTimeout = 10
	// DefaultWebMaxBytes is web.fetch's body limit when [web] max_bytes
	// is zero or absent.
	DefaultWebMaxBytes = 5 << 20
)

type webFetchArgs struct {
	URL     string            `json:"url" jsonschema_description:"The http or https URL to GET."`
	Headers map[string]string `json:"headers,omitempty" jsonschema:"nullable" jsonschema_description:"Extra request headers; they override the default accept: text/markdown."`
	Timeout *int              `json:"timeout,omitempty" jsonschema:"nullable" jsonschema_description:"Seconds the whole request may take. Default: 10."`
}

// WebFetchResult is web.fetch's structured result. URL is the final URL,
// after redirects.
type WebFetchResult struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	// Content is the body as text; an HTML page comes as Markdown, and
	// ConvertedFrom then names the media type it was converted from.
	Content       string `json:"content"`
	ConvertedFrom string `json:"converted_from,omitempty"`
}

func (m *Module) webFetchTool() *registry.Tool {
	return registry.MustNewTool("web.fetch",
		"Fetch(GET) the content of a web page, returning markdown if possible: "+
			"an HTML page is converted to Markdown (links made absolute); markdown and plain text come as served.",
		m.runWebFetch,
		registry.WithRenderer(func(r WebFetchResult) string { return r.Content }),
		registry.WithAnnotations(registry.Annotations{Title: "Fetch a web page", ReadOnly: true, Idempotent: true, OpenWorld: true}))
}

func (m *Module) runWebFetch(ctx context.Context, tc *registry.ToolContext, in webFetchArgs) (WebFetchResult, error) {
	u, err := url.Parse(in.URL)
	if err != nil {
		// Not err itself: *url.Error quotes the whole URL, password too.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return WebFetchResult{}, fail(registry.KindInvalidInput, "`url` is not a valid URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return WebFetchResult{}, fail(registry.KindInvalidInput, "web.fetch only fetches http and https URLs, not %q", u.Redacted())
	}
	if u.Host == "" {
		return WebFetchResult{}, fail(registry.KindInvalidInput, "`url` has no host: %q", u.Redacted())
	}
	timeout := DefaultWebTimeout
	if in.Timeout != nil && *in.Timeout != 0 {
		timeout = *in.Timeout
	}
	if timeout < 0 {
		return WebFetchResult{}, fail(registry.KindInvalidInput, "`timeout` must be >= 1.")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return WebFetchResult{}, fail(registry.KindInvalidInput, "`url` cannot be requested: %v", err)
	}
	req.Header.Set("Accept", "text/markdown")
	req.Header.Set("User-Agent", "bub-mcp")
	for k, v := range in.Headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{Transport: m.webTransport(), Timeout: seconds(timeout)}
	resp, err := client.Do(req)
	if err != nil {
		return WebFetchResult{}, fetchError(u.Redacted(), timeout, err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL.String()
	// Messages (which serve logs) show the URL without its password, as
	// net/http's own errors do.
	shown := resp.Request.URL.Redacted()
	maxBytes := m.maxBytes()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return WebFetchResult{}, fetchError(shown, timeout, err)
	}
	mediaType, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	charset := params["charset"]
	if resp.StatusCode >= 400 {
		return WebFetchResult{}, &registry.Error{Kind: registry.KindTool,
			Message: fmt.Sprintf("HTTP %s: %s", resp.Status, shown),
			Details: map[string]any{"status": resp.StatusCode, "url": shown, "body": preview(decodeBody(body, charset), 2000)}}
	}
	if int64(len(body)) > maxBytes {
		return WebFetchResult{}, fail(registry.KindTool, "response from %s is larger than %d bytes, the web.fetch limit", shown, maxBytes)
	}
	if isBinary(mediaType, body) {
		return WebFetchResult{}, fail(registry.KindTool, "%s returned binary content (%s, %d bytes); web.fetch returns text only", shown, orUnknown(mediaType), len(body))
	}
	r := WebFetchResult{URL: final, Status: resp.StatusCode, ContentType: mediaType, Content: decodeBody(body, charset)}
	asServed := mediaType
	if asServed == "" { // no Content-Type: sniff, as browsers do
		asServed, _, _ = mime.ParseMediaType(http.DetectContentType(body))
	}
	if isHTML(asServed) {
		md, err := htmlToMarkdown(ctx, final, r.Content, m.maxHTMLBytes())
		if err != nil {
			return WebFetchResult{}, fail(registry.KindTool, "%s returned HTML that could not be turned into Markdown: %v", shown, err)
		}
		r.Content, r.ConvertedFrom = md, asServed
	}
	return r, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// fetchError turns a client error into a tool error: a refused address is
// the caller's mistake, a timeout is temporary.
func fetchError(target string, timeout int, err error) *registry.Error {
	var blocked *blockedAddrError
	if errors.As(err, &blocked) {
		return &registry.Error{Kind: registry.KindInvalidInput, Cause: err,
			Message: fmt.Sprintf("web.fetch refuses to connect to %s (%s address) for %s: local network addresses are blocked unless allowed ([web] allow_loopback = true in bub.toml)", blocked.addr, blocked.reason, target)}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &registry.Error{Kind: registry.KindTemporary, Cause: err, Message: fmt.Sprintf("GET %s timed out after %d seconds", target, timeout)}
	}
	if errors.Is(err, context.Canceled) {
		return &registry.Error{Kind: registry.KindTool, Cause: err, Message: "web.fetch cancelled"}
	}
	return &registry.Error{Kind: registry.KindTool, Cause: err, Message: fmt.Sprintf("GET %s failed: %v", target, err)}
}

// blockedAddrError is returned by the dialer for a refused destination.
type blockedAddrError struct {
	addr   netip.Addr
	reason string
}

func (e *blockedAddrError) Error() string {
	return fmt.Sprintf("connection to %s refused: %s address", e.addr, e.reason)
}

// localReason says why ip is not a public destination, or "" when it is.
func localReason(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "a loopback"
	case ip.IsPrivate(), sharedAddrSpace.Contains(ip):
		return "a private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local"
	case ip.IsUnspecified(), thisNetwork.Contains(ip):
		return "an unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "a multicast"
	}
	return ""
}

var (
	sharedAddrSpace = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT
	thisNetwork     = netip.MustParsePrefix("0.0.0.0/8")
)

// guardDial checks each address the dialer is about to connect to, after
// DNS resolution and on every redirect, so neither a hostname nor a
// redirect can reach a local address.
func guardDial(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("web.fetch: dial %s: %w", address, err)
	}
	if reason := localReason(ip); reason != "" {
		return &blockedAddrError{addr: ip.Unmap(), reason: reason}
	}
	return nil
}

// maxBytes is the body limit in force: MaxBytes, or DefaultWebMaxBytes
// when it is zero.
func (m *Module) maxBytes() int64 {
	if m.MaxBytes > 0 {
		return m.MaxBytes
	}
	return DefaultWebMaxBytes
}

// webTransport returns the module's transport, made on first use and
// shared by its calls so connections are reused. Unless AllowLoopback is
// set it guards destinations. It uses no proxy from the environment: a
// proxy would hide the destination from the guard.
func (m *Module) webTransport() *http.Transport {
	m.webMu.Lock()
	defer m.webMu.Unlock()
	if m.transport == nil {
		var control func(string, string, syscall.RawConn) error
		if !m.AllowLoopback {
			control = guardDial
		}
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: control}
		m.transport = &http.Transport{
			DialContext:           d.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          32,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	return m.transport
}

// isBinary reports whether a response is not text: a media type that is
// never text, or a NUL byte near the start.
func isBinary(mediaType string, body []byte) bool {
	main, sub, _ := strings.Cut(mediaType, "/")
	switch main {
	case "image", "audio", "video", "font":
		return !strings.HasSuffix(sub, "+xml") // image/svg+xml is text
	case "application":
		switch sub {
		case "octet-stream", "pdf", "zip", "gzip", "x-gzip", "x-tar", "wasm", "vnd.rar", "x-7z-compressed":
			return true
		}
	}
	return nulIndex(body) >= 0
}

// decodeBody returns the body as UTF-8 text. Latin-1 is converted; other
// charsets (the Content-Type's charset parameter) are taken as UTF-8 with
// invalid bytes replaced by U+FFFD.
func decodeBody(body []byte, charset string) string {
	switch strings.ToLower(charset) {
	case "iso-8859-1", "latin1", "latin-1":
		var b strings.Builder
		b.Grow(len(body))
		for _, c := range body {
			b.WriteRune(rune(c))
		}
		return b.String()
	}
	return validUTF8(body)
}

// preview cuts s to at most n characters.
func preview(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}
