package builtin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testPage = `<!DOCTYPE html>
<html><head><title>T</title><style>p { color: red }</style><script>track()</script></head>
<body><h1>Hello</h1>
<p>See <a href="b.html">b</a>, <a href="/root?q=1">root</a> and <a href="https://example.com/x">ext</a>.</p>
<img src="img.png" alt="pic">
<table><tr><th>k</th><th>v</th></tr><tr><td>1</td><td>2</td></tr></table>
<p><del>old</del> <strong>new</strong></p>
</body></html>`

func htmlServer(t *testing.T) *httptest.Server {
	t.Helper()
	serve := func(ctype, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if ctype != "" {
				w.Header().Set("Content-Type", ctype)
			} else {
				w.Header()["Content-Type"] = nil // no sniffing by net/http
			}
			w.Write([]byte(body))
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/page/a.html", serve("text/html; charset=utf-8", testPage))
	mux.Handle("/xhtml", serve("application/xhtml+xml", `<html xmlns="http://www.w3.org/1999/xhtml"><body><p>x <em>y</em></p></body></html>`))
	mux.Handle("/sniffed", serve("", `<!DOCTYPE html><html><body><h2>Sniffed</h2></body></html>`))
	mux.Handle("/based", serve("text/html", `<html><head><base href="/docs/"></head><body><a href="x">x</a></body></html>`))
	mux.Handle("/plain", serve("text/plain", "<b>not html</b>\n"))
	mux.Handle("/md", serve("text/markdown", "# Already\n\n[rel](a.html)\n"))
	mux.Handle("/js", serve("text/html", `<html><body><div id="app"></div><script>render()</script></body></html>`))
	mux.Handle("/huge", serve("text/html", "<html><body>"+strings.Repeat("<p>word</p>\n", 1000)+"</body></html>"))
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/page/a.html", http.StatusFound) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestWebFetchHTMLToMarkdown(t *testing.T) {
	f := newModuleFixture(t, &Module{AllowLoopback: true}, nil)
	srv := htmlServer(t)
	u := srv.URL
	page := "# Hello\n\nSee [b](" + u + "/page/b.html), [root](" + u + "/root?q=1) and [ext](https://example.com/x).\n\n" +
		"![pic](" + u + "/page/img.png)\n\n| k | v |\n|---|---|\n| 1 | 2 |\n\n~~old~~ **new**"
	tests := []struct {
		path string
		want WebFetchResult
	}{
		{"/page/a.html", WebFetchResult{URL: u + "/page/a.html", Status: 200, ContentType: "text/html", ConvertedFrom: "text/html", Content: page}},
		{"/moved", WebFetchResult{URL: u + "/page/a.html", Status: 200, ContentType: "text/html", ConvertedFrom: "text/html", Content: page}},
		{"/xhtml", WebFetchResult{URL: u + "/xhtml", Status: 200, ContentType: "application/xhtml+xml", ConvertedFrom: "application/xhtml+xml", Content: "x *y*"}},
		{"/sniffed", WebFetchResult{URL: u + "/sniffed", Status: 200, ConvertedFrom: "text/html", Content: "## Sniffed"}},
		{"/based", WebFetchResult{URL: u + "/based", Status: 200, ContentType: "text/html", ConvertedFrom: "text/html", Content: "[x](" + u + "/docs/x)"}},
		{"/plain", WebFetchResult{URL: u + "/plain", Status: 200, ContentType: "text/plain", Content: "<b>not html</b>\n"}},
		{"/md", WebFetchResult{URL: u + "/md", Status: 200, ContentType: "text/markdown", Content: "# Already\n\n[rel](a.html)\n"}},
		{"/js", WebFetchResult{URL: u + "/js", Status: 200, ContentType: "text/html", ConvertedFrom: "text/html",
			Content: "(the HTML page has no text; it may be rendered by JavaScript)"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := f.call("web.fetch", map[string]any{"url": u + tt.path})
			if res.Err != nil {
				t.Fatalf("web.fetch(%s): %v", tt.path, res.Err)
			}
			if diff := cmp.Diff(tt.want, res.Value); diff != "" {
				t.Errorf("web.fetch(%s) (-want +got):\n%s", tt.path, diff)
			}
			if res.Text != tt.want.Content {
				t.Errorf("web.fetch(%s) text = %q; want the content", tt.path, res.Text)
			}
		})
	}

	small := newModuleFixture(t, &Module{AllowLoopback: true, MaxHTMLBytes: 4096}, nil)
	res := small.call("web.fetch", map[string]any{"url": u + "/huge"})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	md := res.Value.(WebFetchResult).Content
	if !strings.HasPrefix(md, "word\n\nword") || !strings.Contains(md, "[web.fetch: the page is ") || !strings.HasSuffix(md, "were converted]") {
		t.Errorf("huge page: %d bytes, ends %q; want Markdown with a note that only part was converted", len(md), md[max(0, len(md)-120):])
	}
	if words := strings.Count(md, "word"); words > 4096/12 {
		t.Errorf("huge page converted %d paragraphs; want at most the %d within max_html_bytes", words, 4096/12)
	}
	// The default limit converts the whole page.
	if md := f.ok("web.fetch", map[string]any{"url": u + "/huge"}); strings.Count(md, "word") != 1000 || strings.Contains(md, "[web.fetch:") {
		t.Errorf("huge page under the default limit: %d paragraphs, note %v; want all 1000, no note", strings.Count(md, "word"), strings.Contains(md, "[web.fetch:"))
	}
}

func TestWebFetchHTMLKeepsTheSSRFGuard(t *testing.T) {
	f := newFixture(t, nil)
	srv := htmlServer(t)
	if e := f.fails("web.fetch", map[string]any{"url": srv.URL + "/page/a.html"}); !strings.Contains(e.Message, "loopback") {
		t.Errorf("loopback HTML fetch = %v; want it refused", e)
	}
}
