package builtin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

func webServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/doc", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		fmt.Fprintf(w, "# Title\naccept=%s x-test=%s", r.Header.Get("Accept"), r.Header.Get("X-Test"))
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=ISO-8859-1")
		w.Write([]byte("caf\xe9"))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nothing here", http.StatusNotFound)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/doc", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 100)))
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestWebFetch(t *testing.T) {
	f := newModuleFixture(t, &Module{AllowLoopback: true}, nil)
	srv := webServer(t)

	res := f.call("web.fetch", map[string]any{"url": srv.URL + "/doc", "headers": map[string]string{"X-Test": "yes"}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := WebFetchResult{URL: srv.URL + "/doc", Status: 200, ContentType: "text/markdown", Content: "# Title\naccept=text/markdown x-test=yes"}
	if diff := cmp.Diff(want, res.Value); diff != "" {
		t.Errorf("web.fetch (-want +got):\n%s", diff)
	}
	if res.Text != want.Content {
		t.Errorf("rendered = %q; want the content", res.Text)
	}
	if got := f.ok("web.fetch", map[string]any{"url": srv.URL + "/doc", "headers": map[string]string{"Accept": "text/html"}}); !strings.Contains(got, "accept=text/html") {
		t.Errorf("headers do not override accept: %q", got)
	}
	if got := f.call("web.fetch", map[string]any{"url": srv.URL + "/redirect"}); got.Err != nil || got.Value.(WebFetchResult).URL != srv.URL+"/doc" {
		t.Errorf("redirect = %+v", got)
	}
	if got := f.ok("web.fetch", map[string]any{"url": srv.URL + "/latin1"}); got != "café" {
		t.Errorf("latin-1 page = %q", got)
	}

	e := f.fails("web.fetch", map[string]any{"url": srv.URL + "/missing"})
	if e.Kind != registry.KindTool || e.Message != "HTTP 404 Not Found: "+srv.URL+"/missing" || e.Details["status"] != 404 {
		t.Errorf("404 = %v %v", e, e.Details)
	}
	if e := f.fails("web.fetch", map[string]any{"url": srv.URL + "/image"}); !strings.Contains(e.Message, "binary content (image/png") {
		t.Errorf("image = %v", e)
	}
	if e := f.fails("web.fetch", map[string]any{"url": srv.URL + "/slow", "timeout": 1}); e.Kind != registry.KindTemporary || !strings.Contains(e.Message, "timed out after 1 seconds") {
		t.Errorf("slow = %v", e)
	}

	small := newModuleFixture(t, &Module{AllowLoopback: true, MaxBytes: 10}, nil)
	if e := small.fails("web.fetch", map[string]any{"url": srv.URL + "/big"}); !strings.Contains(e.Message, "larger than 10 bytes") {
		t.Errorf("over the size cap = %v", e)
	}
}

func TestWebFetchRefusesBadURLs(t *testing.T) {
	f := newModuleFixture(t, &Module{AllowLoopback: true}, nil)
	for _, u := range []string{"file:///etc/passwd", "ftp://example.com/x", "javascript:alert(1)", "http://", "::not a url"} {
		e := f.fails("web.fetch", map[string]any{"url": u})
		if e.Kind != registry.KindInvalidInput {
			t.Errorf("web.fetch(%q) = %v; want invalid_input", u, e)
		}
	}
	if e := f.fails("web.fetch", map[string]any{"url": "http://example.com", "timeout": -1}); e.Kind != registry.KindInvalidInput {
		t.Errorf("negative timeout = %v", e)
	}
}

func TestWebFetchRefusesLoopbackByDefault(t *testing.T) {
	f := newFixture(t, nil)
	srv := webServer(t)
	e := f.fails("web.fetch", map[string]any{"url": srv.URL + "/doc"})
	if e.Kind != registry.KindInvalidInput || !strings.Contains(e.Message, "loopback") {
		t.Errorf("loopback fetch = %v; want it refused", e)
	}
	// A name that resolves to loopback is refused at dial time too.
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	if e := f.fails("web.fetch", map[string]any{"url": "http://localhost:" + port + "/doc"}); !strings.Contains(e.Message, "loopback") {
		t.Errorf("localhost fetch = %v; want it refused", e)
	}
}

func TestLocalReason(t *testing.T) {
	tests := map[string]string{
		"127.0.0.1":        "a loopback",
		"::1":              "a loopback",
		"::ffff:127.0.0.1": "a loopback",
		"10.1.2.3":         "a private",
		"192.168.0.1":      "a private",
		"172.16.5.4":       "a private",
		"100.64.0.1":       "a private",
		"fd00::1":          "a private",
		"169.254.169.254":  "a link-local",
		"fe80::1":          "a link-local",
		"0.0.0.0":          "an unspecified",
		"::":               "an unspecified",
		"239.1.2.3":        "a multicast",
		"93.184.215.14":    "",
		"2606:4700::1":     "",
	}
	for addr, want := range tests {
		if got := localReason(netip.MustParseAddr(addr)); got != want {
			t.Errorf("localReason(%s) = %q; want %q", addr, got, want)
		}
	}
}
