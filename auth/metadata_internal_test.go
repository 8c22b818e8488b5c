package auth

import "testing"

// A discovery document cannot send the client secret or tokens in the
// clear: its introspection_endpoint and jwks_uri must be https, or http
// on a loopback host.
func TestSecureEndpoint(t *testing.T) {
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{"https://idp.example.com/introspect", true},
		{"http://127.0.0.1:4444/introspect", true},
		{"http://localhost/jwks", true},
		{"http://[::1]:8080/jwks", true},
		{"http://idp.example.com/introspect", false},
		{"ftp://idp.example.com/x", false},
		{"/relative", false},
	} {
		if err := secureEndpoint("introspection_endpoint", tc.raw); (err == nil) != tc.ok {
			t.Errorf("secureEndpoint(%q) = %v; want ok=%v", tc.raw, err, tc.ok)
		}
	}
}
