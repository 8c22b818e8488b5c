package upstream

import "testing"

// Only [upstreams] is reloaded: the digest of the rest of bub.toml tells
// a reload that another table changed (and needs a restart), and not that
// an upstream did.
func TestOthersDigest(t *testing.T) {
	base := othersDigest([]byte("[server]\nshutdown_grace = \"5s\"\n[upstreams.a]\ncommand = \"x\"\n"))
	for _, tc := range []struct {
		name, src string
		same      bool
	}{
		{"upstream changed", "[server]\nshutdown_grace = \"5s\"\n[upstreams.a]\ncommand = \"y\"\n", true},
		{"upstream added", "[server]\nshutdown_grace = \"5s\"\n[upstreams.a]\ncommand = \"x\"\n[upstreams.b]\nurl = \"http://h\"\n", true},
		{"reordered and commented", "# hi\n[upstreams.a]\ncommand = \"x\"\n[server]\nshutdown_grace = \"5s\"\n", true},
		{"server key changed", "[server]\nshutdown_grace = \"6s\"\n[upstreams.a]\ncommand = \"x\"\n", false},
		{"table added", "[server]\nshutdown_grace = \"5s\"\n[web]\n[upstreams.a]\ncommand = \"x\"\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := othersDigest([]byte(tc.src)) == base; got != tc.same {
				t.Errorf("same digest = %v; want %v", got, tc.same)
			}
		})
	}
}
