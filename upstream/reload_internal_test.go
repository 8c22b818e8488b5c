package upstream

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

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

// The file watch polls every interval: it hashes a file again only when
// its size or modification time changed, and an edit always changes one.
func TestWatchDigestReadsOnlyChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bub.toml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var h hotState
	write("[upstreams.a]\ncommand = \"x\"\n")
	first := h.digest(path)
	if first != fileDigest(path) {
		t.Fatalf("digest %s; want the content's %s", first, fileDigest(path))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Same size, time put back: a poll does not read it (the content's
	// digest would differ).
	write("[upstreams.b]\ncommand = \"x\"\n")
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got := h.digest(path); got != first {
		t.Errorf("unchanged size and time: digest %s; want the remembered %s", got, first)
	}
	// An edit moves the time: read again.
	later := fi.ModTime().Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if got, want := h.digest(path), fileDigest(path); got != want || got == first {
		t.Errorf("after an edit: digest %s; want the new content's %s", got, want)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := h.digest(path); got != "missing" {
		t.Errorf("removed: digest %s; want missing", got)
	}
}

// A retired server's drain ends as soon as its last call does, and at
// once with none in flight.
func TestActiveCallsIdle(t *testing.T) {
	var a activeCalls
	select {
	case <-a.idle():
	default:
		t.Fatal("no call ever made: not idle")
	}
	a.add()
	a.add()
	idle := a.idle()
	a.done()
	select {
	case <-idle:
		t.Fatal("idle with a call in flight")
	default:
	}
	a.done()
	select {
	case <-idle:
	default:
		t.Fatal("not idle after the last call ended")
	}
	a.add()
	select {
	case <-a.idle():
		t.Fatal("idle with a new call in flight")
	default:
	}
	a.done()
}
