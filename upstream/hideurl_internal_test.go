package upstream

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// An HTTP upstream's URL (its query or path may hold a token) never
// reaches its last error: net/http's *url.Error and the configured URL
// quoted in text are both cut to scheme://host.
func TestHideURL(t *testing.T) {
	const cfg = "https://mcp.example.com/v1/sk-path-secret?token=sk-query-secret"
	for _, err := range []error{
		fmt.Errorf("initialize: %w", &url.Error{Op: "Post", URL: cfg, Err: errors.New("connection refused")}),
		fmt.Errorf("failed to connect to SSE stream: %w", &url.Error{Op: "Get", URL: "https://mcp.example.com/sse?session=sk-query-secret", Err: errors.New("EOF")}),
		errors.New("transport error for " + cfg + ": 500"),
	} {
		got := hideURL(err, cfg).Error()
		if strings.Contains(got, "secret") || !strings.Contains(got, "https://mcp.example.com") {
			t.Errorf("hideURL(%q) = %q; want the origin only", err, got)
		}
	}
	if hideURL(nil, cfg) != nil {
		t.Error("hideURL(nil) is not nil")
	}
}
