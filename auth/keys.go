package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// Bounds on what the issuer sends us.
const (
	maxDocumentBytes = 1 << 20 // discovery, JWKS, introspection responses
	maxKeys          = 100     // keys kept from one JWKS
)

// discovery is the part of OIDC / RFC 8414 metadata this package uses.
type discovery struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// keyCache holds the issuer's signing keys. It fetches the JWKS on first
// use, again after refreshInterval, and again when a token names a key id
// it does not know (key rotation) — but not more often than minRefetch, so
// a stream of tokens with made-up key ids cannot make us hammer the issuer.
// Concurrent fetches are coalesced.
type keyCache struct {
	issuer          string
	jwksURL         string // fixed by Options.JWKSURL, else from discovery
	client          *http.Client
	now             func() time.Time
	refreshInterval time.Duration
	minRefetch      time.Duration

	group singleflight.Group

	mu        sync.RWMutex
	disc      *discovery
	keys      []jose.JSONWebKey
	fetched   time.Time // last successful JWKS fetch
	attempted time.Time // last fetch attempt, successful or not
	fetches   int       // JWKS fetches done, for tests and metrics
}

// KeySet is an issuer's published signing keys, fetched from its JWKS and
// kept as a ResourceServer keeps its issuer's: fetched again after an hour,
// and when a token names a key id it does not know (rotation) but at most
// every 30 s, concurrent fetches coalesced, at most 100 public signing
// keys kept. The authorization-server front verifies its IdP's ID tokens
// with one.
type KeySet struct{ c *keyCache }

// NewKeySet returns the key set issuer publishes at jwksURL, fetched with
// client; now is the clock (nil: time.Now).
func NewKeySet(issuer, jwksURL string, client *http.Client, now func() time.Time) *KeySet {
	if now == nil {
		now = time.Now
	}
	return &KeySet{c: &keyCache{issuer: issuer, jwksURL: jwksURL, client: client, now: now,
		refreshInterval: DefaultKeyRefreshInterval, minRefetch: DefaultMinRefetchInterval}}
}

// Keys returns the keys a token that names key id kid may be verified
// with: that key, or every key when kid is "". None, without an error,
// when the issuer does not publish kid.
func (s *KeySet) Keys(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	keys, _, err := s.c.lookup(ctx, kid)
	return keys, err
}

// lookup returns the verification keys for kid ("" when the token names
// none: every key is a candidate). It refetches the JWKS when the cache is
// empty or stale, or when kid is unknown and the last attempt is older than
// minRefetch.
func (c *keyCache) lookup(ctx context.Context, kid string) ([]jose.JSONWebKey, int, error) {
	now := c.now()
	c.mu.RLock()
	keys, fetched, attempted, gen := c.keys, c.fetched, c.attempted, c.fetches
	c.mu.RUnlock()

	found := match(keys, kid)
	stale := fetched.IsZero() || now.Sub(fetched) >= c.refreshInterval
	rateOK := attempted.IsZero() || now.Sub(attempted) >= c.minRefetch
	if (len(found) == 0 || stale) && rateOK {
		if err := c.refresh(ctx); err != nil && len(found) == 0 {
			return nil, 0, err
		}
		c.mu.RLock()
		keys, gen = c.keys, c.fetches
		c.mu.RUnlock()
		found = match(keys, kid)
	}
	return found, gen, nil
}

// match picks the keys a token may be verified with: the one with the
// token's kid, or all of them when the token names no kid.
func match(keys []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	if kid == "" {
		return keys
	}
	for _, k := range keys {
		if k.KeyID == kid {
			return []jose.JSONWebKey{k}
		}
	}
	return nil
}

// refresh fetches the JWKS (after discovery, the first time), once for all
// concurrent callers.
func (c *keyCache) refresh(ctx context.Context) error {
	_, err, _ := c.group.Do("jwks", func() (any, error) {
		c.mu.Lock()
		c.attempted = c.now()
		c.mu.Unlock()
		// Detach from one request's cancellation: the result serves them all.
		ctx := context.WithoutCancel(ctx)
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		jwksURL := c.jwksURL
		if jwksURL == "" {
			d, err := c.discover(ctx)
			if err != nil {
				return nil, err
			}
			if err := secureEndpoint("jwks_uri", d.JWKSURI); err != nil {
				return nil, err
			}
			jwksURL = d.JWKSURI
		}
		var set jose.JSONWebKeySet
		if err := getJSON(ctx, c.client, jwksURL, &set); err != nil {
			return nil, fmt.Errorf("auth: fetching the issuer's JWKS: %w", err)
		}
		keys := make([]jose.JSONWebKey, 0, len(set.Keys))
		for _, k := range set.Keys {
			if k.IsPublic() && (k.Use == "" || k.Use == "sig") && len(keys) < maxKeys {
				keys = append(keys, k)
			}
		}
		c.mu.Lock()
		c.keys, c.fetched = keys, c.now()
		c.fetches++
		c.mu.Unlock()
		return nil, nil
	})
	return err
}

// discover reads the issuer's metadata once: OIDC discovery first, then
// RFC 8414 (whose well-known path goes before the issuer's path). The
// document must name the configured issuer exactly (OIDC Discovery §4.3,
// RFC 8414 §3.3), or a look-alike could hand us its keys.
func (c *keyCache) discover(ctx context.Context) (*discovery, error) {
	c.mu.RLock()
	d := c.disc
	c.mu.RUnlock()
	if d != nil {
		return d, nil
	}
	u, err := url.Parse(c.issuer)
	if err != nil {
		return nil, fmt.Errorf("auth: issuer %q: %w", c.issuer, err)
	}
	oidc := strings.TrimRight(c.issuer, "/") + "/.well-known/openid-configuration"
	rfc := u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + strings.TrimRight(u.Path, "/")
	var errs []error
	for _, where := range []string{oidc, rfc} {
		var doc discovery
		if err := getJSON(ctx, c.client, where, &doc); err != nil {
			errs = append(errs, err)
			continue
		}
		if doc.Issuer != c.issuer {
			errs = append(errs, fmt.Errorf("%s names issuer %q, want %q", where, doc.Issuer, c.issuer))
			continue
		}
		if doc.JWKSURI == "" {
			errs = append(errs, fmt.Errorf("%s has no jwks_uri", where))
			continue
		}
		c.mu.Lock()
		c.disc = &doc
		c.mu.Unlock()
		return &doc, nil
	}
	return nil, fmt.Errorf("auth: discovering issuer %q: %w", c.issuer, errors.Join(errs...))
}

// getJSON GETs url and decodes at most maxDocumentBytes of JSON into v.
func getJSON(ctx context.Context, client *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return decodeBounded(resp.Body, v)
}

func decodeBounded(r io.Reader, v any) error {
	body, err := io.ReadAll(io.LimitReader(r, maxDocumentBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxDocumentBytes {
		return fmt.Errorf("response larger than %d bytes", maxDocumentBytes)
	}
	return json.Unmarshal(body, v)
}
