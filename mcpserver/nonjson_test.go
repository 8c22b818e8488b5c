package mcpserver_test

import (
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/registry"
)

// measureOut is an object output schema with a number JSON may not carry.
type measureOut struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// TestUnencodableStructuredResult: a tool with an object output schema
// whose value JSON cannot carry (NaN, +Inf) answers a tool error that
// names the problem and shows the value as text, on both eras, instead of
// a reply mcp-go cannot encode; the session keeps working.
func TestUnencodableStructuredResult(t *testing.T) {
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("test.measure", "Measure.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		What string `json:"what"`
	}) (measureOut, error) {
		switch in.What {
		case "nan":
			return measureOut{Name: "nan", Value: math.NaN()}, nil
		case "inf":
			return measureOut{Name: "inf", Value: math.Inf(1)}, nil
		}
		return measureOut{Name: in.What, Value: 1.5}, nil
	}))
	srv := newServer(t, newHost(t, reg, ""))
	handler, closeSessions := httpHandler(srv, streamhttp.Options{Profiles: []string{"default"}, CheckHosts: true})
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	for _, version := range []string{legacy, modern} {
		t.Run(version, func(t *testing.T) {
			c := connect(t, ts.URL+"/mcp", version, nil)
			for _, tc := range []struct{ what, value string }{{"nan", "NaN"}, {"inf", "+Inf"}} {
				res, err := call(t, c, "test_measure", map[string]any{"what": tc.what})
				if err != nil {
					t.Fatalf("%s: the reply broke: %v", tc.what, err)
				}
				got := text(res)
				if !res.IsError || res.StructuredContent != nil || !strings.Contains(got, "tool result is not JSON serializable") || !strings.Contains(got, tc.value) {
					t.Errorf("%s: isError=%v structured=%v text=%q; want a tool error naming the problem, the value %s as text", tc.what, res.IsError, res.StructuredContent, got, tc.value)
				}
			}
			res, err := call(t, c, "test_measure", map[string]any{"what": "ok"})
			if err != nil || res.IsError {
				t.Fatalf("a finite value after them = %+v, %v", res, err)
			}
			if m, ok := res.StructuredContent.(map[string]any); !ok || m["value"] != 1.5 {
				t.Errorf("structuredContent = %#v; want the value 1.5", res.StructuredContent)
			}
		})
	}
}
