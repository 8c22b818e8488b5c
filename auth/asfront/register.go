package asfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bubbuild/bub-mcp/internal/hostcheck"
)

// Bounds on client metadata, registered or fetched.
const (
	maxRegisterBytes  = 16 << 10
	maxCIMDBytes      = 5 << 10 // the CIMD draft's suggested limit
	maxRedirectURIs   = 10
	maxURILength      = 2000
	maxClientName     = 200
	cimdTimeout       = 5 * time.Second
	cimdTTL           = 10 * time.Minute
	cimdErrorTTL      = 30 * time.Second
	maxCIMDCached     = 1000
	dcrClientIDPrefix = "dcr_"
)

// Client is a client the front knows: registered (RFC 7591) or described
// by its Client ID Metadata Document.
type Client struct {
	ID           string   `json:"client_id"`
	Name         string   `json:"client_name,omitempty"`
	RedirectURIs []string `json:"redirect_uris"`
	IssuedAt     int64    `json:"client_id_issued_at,omitempty"`
}

// clientMetadata is what a registration request or a CIMD carries.
type clientMetadata struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

var schemeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`) })

// checkMetadata validates client metadata: at most maxRedirectURIs
// redirect URIs, each https, http on a loopback host (RFC 8252 §7.3), or
// a private-use scheme of a native app (§7.1) — never a scheme a browser
// would run; only the code flow, and only public clients.
func checkMetadata(m *clientMetadata) error {
	if len(m.RedirectURIs) == 0 || len(m.RedirectURIs) > maxRedirectURIs {
		return fmt.Errorf("want between 1 and %d redirect_uris", maxRedirectURIs)
	}
	for _, raw := range m.RedirectURIs {
		if len(raw) > maxURILength {
			return fmt.Errorf("a redirect URI is longer than %d bytes", maxURILength)
		}
		u, err := url.Parse(raw)
		if err != nil || u.Fragment != "" || u.Scheme == "" {
			return fmt.Errorf("redirect URI %q: want an absolute URI without a fragment", raw)
		}
		switch s := strings.ToLower(u.Scheme); {
		case s == "https" && u.Host != "":
		case s == "http" && hostcheck.Loopback(u.Hostname()):
		case s == "http" || s == "https":
			return fmt.Errorf("redirect URI %q: http only on a loopback host", raw)
		case slices.Contains([]string{"javascript", "data", "file", "vbscript", "about", "blob"}, s) || !schemeRE().MatchString(u.Scheme):
			return fmt.Errorf("redirect URI %q: scheme not allowed", raw)
		}
	}
	if len(m.ClientName) > maxClientName {
		return fmt.Errorf("client_name is longer than %d bytes", maxClientName)
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return fmt.Errorf("grant type %q is not supported (authorization_code, refresh_token)", g)
		}
	}
	for _, t := range m.ResponseTypes {
		if t != "code" {
			return fmt.Errorf("response type %q is not supported (code)", t)
		}
	}
	return nil
}

// serveRegister is RFC 7591 registration. Every client is public (PKCE,
// token_endpoint_auth_method none): a secret handed to anyone who asks
// proves nothing.
func (f *Front) serveRegister(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	r.Body = http.MaxBytesReader(w, r.Body, maxRegisterBytes)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.refuse(w, r, oerr(400, "invalid_client_metadata", fmt.Sprintf("the registration is larger than %d bytes", maxRegisterBytes), err))
		return
	}
	var m clientMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		f.refuse(w, r, oerr(400, "invalid_client_metadata", "the registration is not a JSON object", err))
		return
	}
	if err := checkMetadata(&m); err != nil {
		code := "invalid_client_metadata"
		if strings.Contains(err.Error(), "redirect") {
			code = "invalid_redirect_uri"
		}
		f.refuse(w, r, oerr(400, code, err.Error(), nil))
		return
	}
	n, err := f.opts.Store.Count(r.Context(), KindClient)
	if err != nil {
		f.refuse(w, r, oerr(503, "temporarily_unavailable", "the store is unavailable", err))
		return
	}
	if n >= f.opts.MaxClients {
		f.refuse(w, r, oerr(503, "temporarily_unavailable", "too many registered clients (max_clients)", nil))
		return
	}
	c := Client{ID: dcrClientIDPrefix + random(18), Name: m.ClientName, RedirectURIs: m.RedirectURIs, IssuedAt: f.opts.Now().Unix()}
	data, _ := json.Marshal(c)
	if err := f.opts.Store.Create(r.Context(), KindClient, c.ID, Record{Data: data}); err != nil {
		f.refuse(w, r, oerr(503, "temporarily_unavailable", "the store is unavailable", err))
		return
	}
	f.opts.Logger.Info("oauth.proxy.registered", "client_id", c.ID, "client_name", c.Name)
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id":                  c.ID,
		"client_id_issued_at":        c.IssuedAt,
		"client_name":                c.Name,
		"redirect_uris":              c.RedirectURIs,
		"token_endpoint_auth_method": "none",
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
	})
}

// errUnknownClient: no registration and no metadata document.
var errUnknownClient = errors.New("unknown client")

// client finds a client: a CIMD URL is fetched (cached), anything else
// must have been registered.
func (f *Front) client(ctx context.Context, id string) (Client, error) {
	if strings.HasPrefix(id, "https://") || (f.opts.AllowLoopbackClientIDs && strings.HasPrefix(id, "http://")) {
		return f.cimd.get(ctx, id)
	}
	if len(id) > 200 {
		return Client{}, errUnknownClient
	}
	rec, err := f.opts.Store.Get(ctx, KindClient, id)
	if errors.Is(err, ErrNotFound) {
		return Client{}, errUnknownClient
	}
	if err != nil {
		return Client{}, err
	}
	var c Client
	if err := json.Unmarshal(rec.Data, &c); err != nil {
		return Client{}, fmt.Errorf("asfront: client %s: %w", id, err)
	}
	return c, nil
}

// cimdCache fetches Client ID Metadata Documents: the client id is an
// https URL with a path, the document at it names itself as client_id.
// Fetches are bounded in size and time, never follow redirects, never
// reach private or loopback addresses (unless for tests), and are cached
// for cimdTTL.
type cimdCache struct {
	allowLoopback bool
	now           func() time.Time
	client        *http.Client

	mu      sync.Mutex
	entries map[string]cimdEntry
}

type cimdEntry struct {
	c       Client
	err     error
	fetched time.Time
}

func newCIMDCache(allowLoopback bool, now func() time.Time) *cimdCache {
	dialer := &net.Dialer{Timeout: cimdTimeout, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(host)
		if ip == nil {
			return fmt.Errorf("client metadata: %s is not an IP address", host)
		}
		if allowLoopback && ip.IsLoopback() {
			return nil
		}
		if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() {
			return fmt.Errorf("client metadata: %s is not a public address", ip)
		}
		return nil
	}}
	return &cimdCache{
		allowLoopback: allowLoopback,
		now:           now,
		entries:       map[string]cimdEntry{},
		client: &http.Client{
			Timeout:       cimdTimeout,
			Transport:     &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: cimdTimeout, ResponseHeaderTimeout: cimdTimeout},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

func (c *cimdCache) get(ctx context.Context, id string) (Client, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	ttl := cimdTTL
	if ok && e.err != nil {
		ttl = cimdErrorTTL
	}
	if ok && now.Sub(e.fetched) < ttl {
		return e.c, e.err
	}
	cl, err := c.fetch(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCIMDCached {
		for k, old := range c.entries {
			if now.Sub(old.fetched) >= cimdTTL || len(c.entries) >= maxCIMDCached {
				delete(c.entries, k)
			}
		}
	}
	c.entries[id] = cimdEntry{c: cl, err: err, fetched: now}
	return cl, err
}

func (c *cimdCache) fetch(ctx context.Context, id string) (Client, error) {
	u, err := url.Parse(id)
	if err != nil || len(id) > maxURILength || u.Fragment != "" || u.User != nil || u.Path == "" || u.Path == "/" {
		return Client{}, fmt.Errorf("%w: a URL client_id needs a path and no fragment or user info", errUnknownClient)
	}
	if u.Scheme != "https" && !(c.allowLoopback && u.Scheme == "http" && hostcheck.Loopback(u.Hostname())) {
		return Client{}, fmt.Errorf("%w: a URL client_id must be https", errUnknownClient)
	}
	ctx, cancel := context.WithTimeout(ctx, cimdTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return Client{}, fmt.Errorf("%w: %v", errUnknownClient, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return Client{}, fmt.Errorf("%w: fetching its metadata document: %v", errUnknownClient, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Client{}, fmt.Errorf("%w: its metadata document answered %s", errUnknownClient, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCIMDBytes+1))
	if err != nil {
		return Client{}, fmt.Errorf("%w: reading its metadata document: %v", errUnknownClient, err)
	}
	if len(body) > maxCIMDBytes {
		return Client{}, fmt.Errorf("%w: its metadata document is larger than %d bytes", errUnknownClient, maxCIMDBytes)
	}
	var m clientMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		return Client{}, fmt.Errorf("%w: its metadata document is not JSON: %v", errUnknownClient, err)
	}
	if m.ClientID != id {
		return Client{}, fmt.Errorf("%w: its metadata document names client_id %q", errUnknownClient, m.ClientID)
	}
	if m.TokenEndpointAuthMethod != "" && m.TokenEndpointAuthMethod != "none" {
		return Client{}, fmt.Errorf("%w: only public clients (token_endpoint_auth_method none) are supported", errUnknownClient)
	}
	if err := checkMetadata(&m); err != nil {
		return Client{}, fmt.Errorf("%w: %v", errUnknownClient, err)
	}
	return Client{ID: id, Name: m.ClientName, RedirectURIs: m.RedirectURIs}, nil
}
