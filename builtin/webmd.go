package builtin

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
)

// DefaultMaxHTMLBytes is the most HTML web.fetch converts to Markdown when
// [web] max_html_bytes is zero or absent: parsing builds a tree many times
// the page's size, so a bigger page is converted up to the limit, with a
// note saying so.
const DefaultMaxHTMLBytes = 2 << 20

// maxHTMLBytes is the conversion limit in force.
func (m *Module) maxHTMLBytes() int {
	if m.MaxHTMLBytes > 0 {
		return int(min(m.MaxHTMLBytes, math.MaxInt32))
	}
	return DefaultMaxHTMLBytes
}

// isHTML reports whether a response's media type is HTML.
func isHTML(mediaType string) bool {
	return mediaType == "text/html" || mediaType == "application/xhtml+xml"
}

// htmlToMarkdown converts an HTML page fetched from page (its final URL)
// to Markdown (CommonMark with GitHub tables and strikethrough), resolving
// relative links and images against the page's <base href>, or page.
// Scripts, styles and the head are dropped.
// At most limit bytes of text are converted.
func htmlToMarkdown(ctx context.Context, page, text string, limit int) (string, error) {
	note := ""
	if len(text) > limit {
		// Cut before the last tag that starts within the limit, so no
		// half tag is parsed as text.
		cut := strings.LastIndexByte(text[:limit], '<')
		if cut <= 0 {
			cut = limit
		}
		note = fmt.Sprintf("\n\n[web.fetch: the page is %d bytes of HTML; only the first %d were converted]", len(text), cut)
		text = text[:cut]
	}
	doc, err := html.Parse(strings.NewReader(text))
	if err != nil {
		return "", fmt.Errorf("parse HTML: %w", err)
	}
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
		strikethrough.NewStrikethroughPlugin(),
	))
	md, err := conv.ConvertNode(doc, converter.WithContext(ctx), converter.WithDomain(baseURL(doc, page)))
	if err != nil {
		return "", fmt.Errorf("convert HTML to Markdown: %w", err)
	}
	out := strings.TrimSpace(string(md))
	if out == "" {
		out = "(the HTML page has no text; it may be rendered by JavaScript)"
	}
	return out + note, nil
}

// baseURL is what relative links in doc resolve against: its first
// <base href> (itself resolved against page), else page.
func baseURL(doc *html.Node, page string) string {
	var href string
	var find func(n *html.Node) bool
	find = func(n *html.Node) bool {
		if n.Type == html.ElementNode && n.Data == "base" {
			for _, a := range n.Attr {
				if a.Key == "href" {
					href = a.Val
					return true
				}
			}
		}
		if n.Type == html.ElementNode && n.Data == "body" {
			return true // <base> belongs in the head
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if find(c) {
				return true
			}
		}
		return false
	}
	find(doc)
	if href == "" {
		return page
	}
	p, err := url.Parse(page)
	if err != nil {
		return page
	}
	b, err := p.Parse(strings.TrimSpace(href))
	if err != nil || (b.Scheme != "http" && b.Scheme != "https") {
		return page
	}
	return b.String()
}
