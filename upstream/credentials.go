package upstream

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/internal/lockedfile"
	"github.com/mark3labs/mcp-go/client/transport"
)

// This file keeps the token sets of auth = "oauth" servers: one per
// (principal, server), sealed with AES-GCM under a key derived (HKDF) from
// the server's state key, in a CredentialStore (a file per set under
// $BUB_HOME/upstreams/credentials, or PostgreSQL with [store] kind =
// "postgres"). The sealed bytes are bound to their server and principal
// (the GCM additional data), so a set copied to another principal's place
// does not open: one principal's token can never serve another's calls.

// LocalPrincipal is the principal of a caller that did not authenticate: a
// stdio client, a loopback HTTP client without a token, `bub-mcp call`,
// and `bub-mcp login`, which all act for the user at the machine.
const LocalPrincipal = "local"

// principalOf is the principal a call's upstream credentials belong to.
func principalOf(p string) string {
	if p == "" {
		return LocalPrincipal
	}
	return p
}

// ErrNoCredentials is what a CredentialStore returns for a (server,
// principal) without a token set.
var ErrNoCredentials = errors.New("no stored credentials")

// CredentialStore keeps sealed token sets, by server and principal. It
// sees only ciphertext. Implementations are safe for concurrent use by
// several goroutines and several processes (replicas).
type CredentialStore interface {
	// Get returns the sealed set, or ErrNoCredentials.
	Get(ctx context.Context, server, principal string) ([]byte, error)
	// Put stores a sealed set, replacing any.
	Put(ctx context.Context, server, principal string, sealed []byte) error
	// Delete removes a set; it reports whether there was one.
	Delete(ctx context.Context, server, principal string) (bool, error)
	// Principals lists the principals with a set for server, sorted.
	Principals(ctx context.Context, server string) ([]string, error)
	// UseNonce marks the nonce of a login link or of an authorization
	// callback's state used until expires, for every process sharing the
	// store: it reports false when the nonce was marked already, so a
	// link is good once across replicas. Marks past their expiry may be
	// purged. With MaxLoginsInFlight unexpired marks it returns
	// ErrTooManyLogins.
	UseNonce(ctx context.Context, nonce string, expires time.Time) (bool, error)
}

// ErrTooManyLogins is what CredentialStore.UseNonce returns when it holds
// MaxLoginsInFlight unexpired marks.
var ErrTooManyLogins = errors.New("too many sign-ins in progress; try again in a few minutes")

// MaxLoginsInFlight bounds the unexpired marks of used login state that a
// CredentialStore keeps (UseNonce).
const MaxLoginsInFlight = 10000

// CredentialLocker is implemented by CredentialStores that can hold a
// (server, principal) against every other process sharing the store: a
// token refresh runs under it, so that of two replicas whose copy of a
// token ran out at once, one refreshes and the other reads the result
// (a refresh token is good once; sending it twice may revoke the grant).
type CredentialLocker interface {
	// Lock waits, at most until ctx ends, to hold (server, principal);
	// unlock lets go.
	Lock(ctx context.Context, server, principal string) (unlock func(), err error)
}

// credentialStores are the registered CredentialStore kinds beyond the
// file store, by [store] kind: package sessions/pgstore/credstore
// registers "postgres" (it implements CredentialStore and returns
// ErrNoCredentials, so this package cannot import it).
var credentialStores = struct {
	sync.Mutex
	open map[string]func(dsn string) (CredentialStore, error)
}{open: map[string]func(string) (CredentialStore, error){}}

// RegisterCredentialStore makes a store kind available: with [store] kind
// = kind, the module opens its credential store with open(App.StoreDSN()).
// It is for init functions.
func RegisterCredentialStore(kind string, open func(dsn string) (CredentialStore, error)) {
	credentialStores.Lock()
	defer credentialStores.Unlock()
	credentialStores.open[kind] = open
}

// tokenSet is what is sealed for one (principal, server): the token and
// the OAuth client it was issued to (a dynamic registration's id and
// secret), which refreshing it needs.
type tokenSet struct {
	Token        transport.Token `json:"token"`
	ClientID     string          `json:"client_id"`
	ClientSecret string          `json:"client_secret,omitempty"`
	AuthMethod   string          `json:"auth_method,omitempty"`
}

// credentialKeyInfo is the HKDF info of the credentials key: a key of its
// own, never the requestState key itself.
const credentialKeyInfo = "bub-mcp upstream credentials v1"

// sealer seals and opens token sets and login state with AES-GCM.
type sealer struct{ aead cipher.AEAD }

// newSealer derives a key for info from the server's secret.
func newSealer(secret []byte, info string) (*sealer, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, info, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(plain, ad []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return s.aead.Seal(nonce, nonce, plain, ad)
}

func (s *sealer) open(sealed, ad []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed data too short")
	}
	return s.aead.Open(nil, sealed[:n], sealed[n:], ad)
}

// credentialAD binds a sealed set to its server and principal.
func credentialAD(server, principal string) []byte {
	return []byte(server + "\x00" + principal)
}

// credentials is the module's access to token sets: the store and the
// sealer, made on first use (a server without auth = "oauth" never loads
// the key).
type credentials struct {
	once  sync.Once
	err   error
	store CredentialStore
	seal  *sealer // token sets
	state *sealer // login state (oauth.go)
	close func()
}

// creds returns the module's credential store and sealers.
func (m *Module) creds() (*credentials, error) {
	c := &m.credentials
	c.once.Do(func() {
		a := m.app
		cfg := a.Config()
		key, err := loadKey(a.Getenv, cfg.Server.StateKey, a.Home())
		if err != nil {
			c.err = err
			return
		}
		if c.seal, err = newSealer(key, credentialKeyInfo); err == nil {
			c.state, err = newSealer(key, loginStateInfo)
		}
		if err != nil {
			c.err = fmt.Errorf("upstream credentials: %w", err)
			return
		}
		c.close = func() {}
		if dsn := a.StoreDSN(); dsn != "" {
			credentialStores.Lock()
			open := credentialStores.open["postgres"]
			credentialStores.Unlock()
			if open == nil {
				c.err = errors.New(`upstream credentials: [store] kind = "postgres" but no PostgreSQL credential store is linked (package sessions/pgstore/credstore)`)
				return
			}
			s, err := open(dsn)
			if err != nil {
				c.err = fmt.Errorf("upstream credentials: %w", err)
				return
			}
			c.store = s
			if cl, ok := s.(interface{ Close() }); ok {
				c.close = cl.Close
			}
			return
		}
		c.store = FileCredentialStore{Dir: filepath.Join(a.Home(), "upstreams", "credentials")}
	})
	return c, c.err
}

// load opens the token set of (server, principal); nil, ErrNoCredentials
// when there is none.
func (c *credentials) load(ctx context.Context, server, principal string) (*tokenSet, error) {
	b, err := c.store.Get(ctx, server, principal)
	if err != nil {
		return nil, err
	}
	plain, err := c.seal.open(b, credentialAD(server, principal))
	if err != nil {
		// Another key (a changed state_key), or a set moved from another
		// principal: unusable, so the principal signs in again.
		return nil, fmt.Errorf("%w (the stored set does not open with this server's key)", ErrNoCredentials)
	}
	var set tokenSet
	if err := json.Unmarshal(plain, &set); err != nil {
		return nil, fmt.Errorf("upstream credentials: %w", err)
	}
	return &set, nil
}

// save seals and stores a token set.
func (c *credentials) save(ctx context.Context, server, principal string, set *tokenSet) error {
	plain, err := json.Marshal(set)
	if err != nil {
		return err
	}
	return c.store.Put(ctx, server, principal, c.seal.seal(plain, credentialAD(server, principal)))
}

// principalTokens is a transport.TokenStore for one (server, principal):
// every read goes to the store, so a logout in another process (or
// replica) takes effect at the next request. A token that ran out is
// refreshed here, under the store's lock (CredentialLocker), before mcp-go
// sees it; when that fails the principal signs in again.
type principalTokens struct {
	c                 *credentials
	server, principal string
	// refresh exchanges set's refresh token for a new token; nil leaves
	// refreshing to mcp-go.
	refresh func(ctx context.Context, set *tokenSet) (*transport.Token, error)
	log     *slog.Logger
}

// refreshTimeout bounds a refresh under the lock; it does not end with
// the caller, whose giving up would waste a spent refresh token.
const refreshTimeout = 30 * time.Second

// GetToken implements transport.TokenStore.
func (p *principalTokens) GetToken(ctx context.Context) (*transport.Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	set, err := p.c.load(ctx, p.server, p.principal)
	if errors.Is(err, ErrNoCredentials) {
		return nil, transport.ErrNoToken
	}
	if err != nil {
		return nil, err
	}
	if p.refresh == nil || !set.Token.IsExpired() || set.Token.RefreshToken == "" {
		return &set.Token, nil
	}
	return p.refreshed(ctx)
}

// refreshed refreshes the stored token under the store's lock, unless
// another process did so while this one waited for it.
func (p *principalTokens) refreshed(ctx context.Context) (*transport.Token, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
	defer cancel()
	unlock, err := p.c.lock(ctx, p.server, p.principal)
	if err != nil {
		return nil, err
	}
	defer unlock()
	set, err := p.c.load(ctx, p.server, p.principal)
	if errors.Is(err, ErrNoCredentials) {
		return nil, transport.ErrNoToken
	}
	if err != nil {
		return nil, err
	}
	if !set.Token.IsExpired() {
		return &set.Token, nil // refreshed meanwhile
	}
	tok, err := p.refresh(ctx, set)
	if err != nil {
		p.log.Warn("upstream.refresh", "upstream", p.server, "principal", p.principal, "error", err)
		return nil, transport.ErrNoToken // the principal signs in again
	}
	set.Token = *tok
	if err := p.c.save(ctx, p.server, p.principal, set); err != nil {
		return nil, err
	}
	return &set.Token, nil
}

// lock holds (server, principal) in the store, when it can.
func (c *credentials) lock(ctx context.Context, server, principal string) (func(), error) {
	if l, ok := c.store.(CredentialLocker); ok {
		return l.Lock(ctx, server, principal)
	}
	return func() {}, nil
}

// SaveToken implements transport.TokenStore: a refreshed token replaces
// the set's, keeping its client.
func (p *principalTokens) SaveToken(ctx context.Context, tok *transport.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	set, err := p.c.load(ctx, p.server, p.principal)
	if err != nil {
		return err
	}
	set.Token = *tok
	return p.c.save(ctx, p.server, p.principal, set)
}

// FileCredentialStore keeps each sealed set in
// Dir/<server>/<sha256(principal)>.json (mode 0600, written atomically
// under an flock, so processes sharing $BUB_HOME never see half a file nor
// lose a write), with the principal's name beside the ciphertext for
// Principals.
type FileCredentialStore struct{ Dir string }

// maxCredentialFileBytes bounds one credentials file.
const maxCredentialFileBytes = 1 << 20

type credentialFile struct {
	Principal string `json:"principal"`
	Sealed    []byte `json:"sealed"`
}

func (s FileCredentialStore) file(server, principal string) string {
	sum := sha256.Sum256([]byte(principal))
	return filepath.Join(s.Dir, server, hex.EncodeToString(sum[:])+".json")
}

// locked runs fn holding the server directory's lock file.
func (s FileCredentialStore) locked(server string, fn func() error) error {
	unlock, err := lockedfile.Lock(context.Background(), filepath.Join(s.Dir, server, ".lock"))
	if err != nil {
		return fmt.Errorf("upstream credentials: %w", err)
	}
	defer unlock()
	return fn()
}

func (s FileCredentialStore) read(path string) (*credentialFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoCredentials
	}
	if err != nil {
		return nil, fmt.Errorf("upstream credentials: %w", err)
	}
	defer f.Close()
	var cf credentialFile
	if err := json.NewDecoder(&limitReader{r: f, n: maxCredentialFileBytes}).Decode(&cf); err != nil {
		return nil, fmt.Errorf("upstream credentials: %s: %w", path, err)
	}
	return &cf, nil
}

// Lock implements CredentialLocker with an flock on
// Dir/<server>/<sha256(principal)>.lock, tried until ctx ends.
func (s FileCredentialStore) Lock(ctx context.Context, server, principal string) (func(), error) {
	path := strings.TrimSuffix(s.file(server, principal), ".json") + ".lock"
	unlock, err := lockedfile.Lock(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("upstream credentials: %w", err)
	}
	return unlock, nil
}

// Get implements CredentialStore.
func (s FileCredentialStore) Get(_ context.Context, server, principal string) ([]byte, error) {
	cf, err := s.read(s.file(server, principal))
	if err != nil {
		return nil, err
	}
	if cf.Principal != principal { // a hash collision, or a file put there by hand
		return nil, ErrNoCredentials
	}
	return cf.Sealed, nil
}

// Put implements CredentialStore.
func (s FileCredentialStore) Put(_ context.Context, server, principal string, sealed []byte) error {
	b, err := json.Marshal(credentialFile{Principal: principal, Sealed: sealed})
	if err != nil {
		return err
	}
	return s.locked(server, func() error {
		if err := lockedfile.Write(s.file(server, principal), b, 0o600); err != nil {
			return fmt.Errorf("upstream credentials: %w", err)
		}
		return nil
	})
}

// Delete implements CredentialStore.
func (s FileCredentialStore) Delete(_ context.Context, server, principal string) (bool, error) {
	found := false
	err := s.locked(server, func() error {
		err := os.Remove(s.file(server, principal))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		found = err == nil
		return err
	})
	return found, err
}

// Principals implements CredentialStore.
func (s FileCredentialStore) Principals(_ context.Context, server string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.Dir, server))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("upstream credentials: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		cf, err := s.read(filepath.Join(s.Dir, server, e.Name()))
		if err != nil {
			continue // removed meanwhile, or not ours
		}
		out = append(out, cf.Principal)
	}
	sort.Strings(out)
	return out, nil
}

// nonceDir is where UseNonce marks used login state: a file per nonce,
// named <expires unix>-<sha256(nonce)>, made with O_EXCL (which one
// process wins across all that share the directory) and removed once
// expired.
func (s FileCredentialStore) nonceDir() string { return filepath.Join(s.Dir, ".login-nonces") }

// UseNonce implements CredentialStore.
func (s FileCredentialStore) UseNonce(_ context.Context, nonce string, expires time.Time) (bool, error) {
	dir := s.nonceDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("upstream credentials: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("upstream credentials: %w", err)
	}
	now, live := time.Now().Unix(), 0
	for _, e := range entries {
		exp, _, ok := strings.Cut(e.Name(), "-")
		if t, err := strconv.ParseInt(exp, 10, 64); ok && err == nil && t < now {
			os.Remove(filepath.Join(dir, e.Name())) // another process may have removed it first
			continue
		}
		live++
	}
	sum := sha256.Sum256([]byte(nonce))
	path := filepath.Join(dir, strconv.FormatInt(expires.Unix(), 10)+"-"+hex.EncodeToString(sum[:]))
	if live >= MaxLoginsInFlight {
		if _, err := os.Lstat(path); err == nil {
			return false, nil // used already: that answer wins over the bound
		}
		return false, ErrTooManyLogins
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("upstream credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("upstream credentials: %w", err)
	}
	return true, nil
}

var _ CredentialStore = FileCredentialStore{}
var _ CredentialLocker = FileCredentialStore{}
var _ transport.TokenStore = (*principalTokens)(nil)
