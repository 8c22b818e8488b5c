package builtin

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestWebFetchErrorsHideURLPassword: a URL's password never shows in a
// web.fetch error (serve logs tool errors), whichever way the fetch
// fails; net/http's own text already hides it.
func TestWebFetchErrorsHideURLPassword(t *testing.T) {
	srv := webServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	withCreds := func(base, path string) string {
		return strings.Replace(base, "http://", "http://user:s3cret-pw@", 1) + path
	}
	allowed := newModuleFixture(t, &Module{AllowLoopback: true}, nil)
	tests := []struct {
		name string
		f    *fixture
		url  string
		want string
	}{
		{"HTTP error", allowed, withCreds(srv.URL, "/missing"), "HTTP 404"},
		{"binary", allowed, withCreds(srv.URL, "/image"), "binary content"},
		{"connection refused", allowed, withCreds("http://"+closed, "/x"), "failed"},
		{"loopback refused", newFixture(t, nil), withCreds(srv.URL, "/doc"), "loopback"},
		{"not http", allowed, "ftp://user:s3cret-pw@h.example/x", "http and https"},
		{"no host", allowed, "http://user:s3cret-pw@/x", "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.f.fails("web.fetch", map[string]any{"url": tt.url})
			text := e.Message + fmt.Sprint(e.Details)
			if !strings.Contains(e.Message, tt.want) || strings.Contains(text, "s3cret-pw") || !strings.Contains(e.Message, "user:xxxxx@") {
				t.Errorf("error = %q, details %v; want %q, the password redacted", e.Message, e.Details, tt.want)
			}
		})
	}
	// A URL that does not parse is not quoted at all: url.Error would
	// repeat it whole.
	e := allowed.fails("web.fetch", map[string]any{"url": "http://user:s3cret-pw@h.example/%zz"})
	if text := e.Message + fmt.Sprint(e.Details); strings.Contains(text, "s3cret-pw") || !strings.Contains(e.Message, "not a valid URL") {
		t.Errorf("unparsable URL: error = %q, details %v; want it refused without the password", e.Message, e.Details)
	}
}
