package hostcheck_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/hostcheck"
)

func TestHandler(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := hostcheck.Handler(ok, []string{"Dev.Box"}, []string{"http://localhost:6274"})
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:8080", "", 200},
		{"localhost", "http://localhost:3000", 200},
		{"[::1]:8080", "", 200},
		{"app.localhost", "", 200},
		{"dev.box:8080", "http://DEV.BOX", 200},
		{"127.0.0.1", "null", 200},
		{"127.0.0.1", "http://localhost:6274", 200},
		{"evil.example", "", 403},
		{"127.0.0.1", "http://evil.example", 403},
		{"127.0.0.1", "http://localhost.evil.example", 403},
		{"127.0.0.1", "::not a url", 403},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("Host %q Origin %q: %d; want %d", tc.host, tc.origin, w.Code, tc.want)
		}
	}
}

// One answer to "is this host loopback", for listen addresses, issuer and
// client URLs alike (config took only three spellings, auth all of
// 127.0.0.0/8).
func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "127.0.0.1": true, "127.0.0.2": true, "::1": true, "[::1]": true,
		"0.0.0.0": false, "::": false, "10.0.0.1": false, "example.com": false, "localhost.example.com": false, "": false,
	} {
		if got := hostcheck.Loopback(host); got != want {
			t.Errorf("Loopback(%q) = %v; want %v", host, got, want)
		}
	}
}
