package asfront

import "testing"

// A loopback IP literal's redirect URI matches on any port (RFC 8252
// §7.3); everything else, localhost included, matches exactly.
func TestRedirectMatches(t *testing.T) {
	tests := []struct {
		registered, requested string
		want                  bool
	}{
		{"https://app.example.com/cb", "https://app.example.com/cb", true},
		{"https://app.example.com/cb", "https://app.example.com:8443/cb", false},
		{"http://127.0.0.1/cb", "http://127.0.0.1:53124/cb", true},
		{"http://127.0.0.1:9/cb", "http://127.0.0.1:53124/cb", true},
		{"http://127.0.0.1:9/cb", "http://127.0.0.1/cb", true},
		{"http://[::1]/cb", "http://[::1]:53124/cb", true},
		{"http://127.0.0.1/cb?x=1", "http://127.0.0.1:5/cb?x=1", true},
		{"http://127.0.0.1/cb", "http://127.0.0.1:5/cb/", false},
		{"http://127.0.0.1/cb", "http://127.0.0.1:5/cb?x=1", false},
		{"http://127.0.0.1/cb", "http://127.0.0.2:5/cb", false},
		{"http://127.0.0.1/cb", "http://[::1]:5/cb", false},
		{"http://127.0.0.1/cb", "https://127.0.0.1:5/cb", false},
		{"http://127.0.0.1/cb", "http://user@127.0.0.1:5/cb", false},
		{"http://localhost:8/cb", "http://localhost:9/cb", false},
		{"http://localhost/cb", "http://localhost/cb", true},
		{"http://127.0.0.1/cb", "http://evil.example.com@127.0.0.1:5/cb", false},
		{"http://127.0.0.1/cb", "http://127.0.0.1:5/cb#frag", false},
	}
	for _, tt := range tests {
		if got := redirectMatches(tt.registered, tt.requested); got != tt.want {
			t.Errorf("redirectMatches(%q, %q) = %v; want %v", tt.registered, tt.requested, got, tt.want)
		}
	}
}
