package auth_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/google/go-cmp/cmp"
)

// TestKeySet: the keys for a kid, every key for none, nothing (and no
// error) for a kid the issuer does not publish; a kid the issuer rotates
// in is found once the rate limit on refetches allows; a dead JWKS is an
// error.
func TestKeySet(t *testing.T) {
	idp := newFakeIdP(t)
	idp.add(t, "k2", "ES256")
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	set := auth.NewKeySet(idp.issuer(), idp.issuer()+"/jwks", http.DefaultClient, clock)
	ctx := context.Background()
	kids := func(kid string) []string {
		t.Helper()
		keys, err := set.Keys(ctx, kid)
		if err != nil {
			t.Fatalf("Keys(%q): %v", kid, err)
		}
		out := []string{}
		for _, k := range keys {
			out = append(out, k.KeyID)
		}
		return out
	}
	for _, tt := range []struct {
		kid  string
		want []string
	}{
		{"k1", []string{"k1"}},
		{"", []string{"k1", "k2"}},
		{"k3", []string{}},
	} {
		if diff := cmp.Diff(tt.want, kids(tt.kid)); diff != "" {
			t.Errorf("Keys(%q) (-want +got):\n%s", tt.kid, diff)
		}
	}
	fetches := idp.fetches.Load()
	idp.add(t, "k3", "ES256")
	if got := kids("k3"); len(got) != 0 || idp.fetches.Load() != fetches {
		t.Errorf("Keys(k3) right after a refetch = %v with %d more fetches; want none: refetches are rate-limited", got, idp.fetches.Load()-fetches)
	}
	now = now.Add(auth.DefaultMinRefetchInterval)
	if diff := cmp.Diff([]string{"k3"}, kids("k3")); diff != "" {
		t.Errorf("Keys(k3) after the rate limit (-want +got):\n%s", diff)
	}

	dead := auth.NewKeySet(idp.issuer(), idp.issuer()+"/no-jwks", http.DefaultClient, clock)
	if _, err := dead.Keys(ctx, "k1"); err == nil {
		t.Error("Keys from a JWKS URL that answers 404 succeeded")
	}
}
