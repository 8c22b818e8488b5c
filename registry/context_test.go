package registry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bubbuild/bub-mcp/registry"
)

// TestCallerTokenHidden: a Connection printed, logged or marshalled whole
// carries no trace of the caller's token; Reveal gives it back.
func TestCallerTokenHidden(t *testing.T) {
	const secret = "eyJ.secret-caller-token.sig"
	c := registry.Connection{Transport: "http", Principal: "https://as#alice", OAuthToken: registry.NewCallerToken(secret)}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "conn", c, "ptr", &c, "tok", c.OAuthToken)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "conn", c, "tok", c.OAuthToken)
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c), "%s ptr": fmt.Sprintf("%+v", &c),
		"slog": logged.String(), "json": string(js),
	} {
		if strings.Contains(s, "secret-caller-token") {
			t.Errorf("%s shows the token: %s", name, s)
		}
	}
	if got := c.OAuthToken.Reveal(); got != secret || !c.OAuthToken.IsSet() {
		t.Errorf("Reveal() = %q; want the token", got)
	}
	if (registry.Connection{}).OAuthToken.IsSet() {
		t.Errorf("the zero Connection has a token")
	}
}

// Connections holding tokens compare with go-cmp (as tests of every
// package do) without a panic over the unexported field.
func TestCallerTokenCompares(t *testing.T) {
	a := registry.Connection{Profile: "p", OAuthToken: registry.NewCallerToken("tok-a")}
	if diff := cmp.Diff(a, registry.Connection{Profile: "p", OAuthToken: registry.NewCallerToken("tok-a")}); diff != "" {
		t.Errorf("equal tokens differ:\n%s", diff)
	}
	diff := cmp.Diff(a, registry.Connection{Profile: "p", OAuthToken: registry.NewCallerToken("tok-b")})
	if diff == "" {
		t.Error("two different tokens compare equal")
	}
}
