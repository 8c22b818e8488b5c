package auth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// fakeIdP is a local issuer (discovery + JWKS on 127.0.0.1) whose keys the
// test holds, so it can mint the tokens a real IdP never issues: expired,
// for another audience, signed with alg none or HS256, with an unknown kid.
type fakeIdP struct {
	srv     *httptest.Server
	fetches atomic.Int64

	mu   sync.Mutex
	keys []signingKey // published in the JWKS
}

type signingKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func newFakeIdP(t testing.TB) *fakeIdP {
	t.Helper()
	f := &fakeIdP{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]string{
				"issuer": f.srv.URL, "jwks_uri": f.srv.URL + "/jwks"})
		case "/jwks":
			f.fetches.Add(1)
			f.mu.Lock()
			var set jose.JSONWebKeySet
			for _, k := range f.keys {
				set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
			}
			f.mu.Unlock()
			_ = json.NewEncoder(w).Encode(set)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.srv.Close)
	f.add(t, "k1", jose.RS256)
	return f
}

func (f *fakeIdP) issuer() string { return f.srv.URL }

// add publishes a new key; the newest key signs by default.
func (f *fakeIdP) add(t testing.TB, kid string, alg jose.SignatureAlgorithm) signingKey {
	t.Helper()
	var k crypto.Signer
	var err error
	switch alg {
	case jose.ES256:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	sk := signingKey{kid: kid, alg: alg, key: k}
	f.mu.Lock()
	f.keys = append(f.keys, sk)
	f.mu.Unlock()
	return sk
}

// rotate replaces every published key by a new one with id kid.
func (f *fakeIdP) rotate(t testing.TB, kid string) {
	t.Helper()
	f.mu.Lock()
	f.keys = nil
	f.mu.Unlock()
	f.add(t, kid, jose.RS256)
}

func (f *fakeIdP) current() signingKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[len(f.keys)-1]
}

// mint signs claims with k (kid in the header).
func mint(t testing.TB, k signingKey, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if k.kid != "" {
		opts = opts.WithHeader("kid", k.kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// unsigned builds `alg: none` token.
func unsigned(kid string, claims map[string]any) string {
	return b64(map[string]string{"alg": "none", "kid": kid}) + "." + b64(claims) + "."
}

// hs256WithPublicKey builds the classic algorithm-confusion token: HS256,
// with the issuer's RSA public key (PEM, as a naive verifier would load it)
// as the HMAC secret.
func hs256WithPublicKey(t testing.TB, k signingKey, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	signing := b64(map[string]string{"alg": "HS256", "kid": k.kid, "typ": "JWT"}) + "." + b64(claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// withClaims returns a copy of base with changes applied (nil deletes).
func withClaims(base map[string]any, changes map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}
