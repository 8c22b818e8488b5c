package oidctest_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bubbuild/bub-mcp/internal/oidctest"
)

func TestMain(m *testing.M) { os.Exit(oidctest.Run(m)) }

// TestToken checks the helper end to end: a real authorization-code flow
// at the real Hydra yields a JWT carrying the subject, audience, scopes and
// extra claims the test asked for, and an opaque token for an opaque client.
func TestToken(t *testing.T) {
	p := oidctest.Start(t)
	aud := "http://127.0.0.1:9/mcp"
	req := oidctest.TokenRequest{Subject: "alice", Scopes: []string{"mcp"}, Audience: []string{aud},
		Claims: map[string]any{"groups": []string{"eng"}}}

	c := p.NewClient(t, oidctest.ClientOptions{Audience: []string{aud}, Scopes: []string{"mcp"}})
	tok := p.Token(t, c, req)
	parts := strings.Split(tok.AccessToken, ".")
	if len(parts) != 3 {
		t.Fatalf("access token has %d parts; want a JWT", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Iss    string   `json:"iss"`
		Sub    string   `json:"sub"`
		Aud    []string `json:"aud"`
		Scp    []string `json:"scp"`
		Groups []string `json:"groups"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	want := struct {
		Iss    string   `json:"iss"`
		Sub    string   `json:"sub"`
		Aud    []string `json:"aud"`
		Scp    []string `json:"scp"`
		Groups []string `json:"groups"`
	}{p.Issuer, "alice", []string{aud}, []string{"openid", "mcp"}, []string{"eng"}}
	if d := cmp.Diff(want, claims); d != "" {
		t.Errorf("claims (-want +got):\n%s", d)
	}

	opaque := p.NewClient(t, oidctest.ClientOptions{Audience: []string{aud}, Scopes: []string{"mcp"}, Opaque: true})
	if tok := p.Token(t, opaque, req); strings.Count(tok.AccessToken, ".") == 2 || tok.AccessToken == "" {
		t.Errorf("opaque client got %q; want an opaque token", tok.AccessToken)
	}
}
