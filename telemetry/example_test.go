package telemetry_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/bubbuild/bub-mcp/telemetry"
)

// Example shows the life of one tools/call: a server span (exported only
// when OTEL_EXPORTER_OTLP_ENDPOINT is set), a nested call from run_code, the
// outcome, and the scrape of /metrics.
func Example() {
	tel, err := telemetry.New(&telemetry.Options{
		Getenv:      func(string) string { return "" }, // as if no OTEL_* is set
		ServiceName: "bub-mcp",
		Metrics:     true,
	})
	if err != nil {
		panic(err)
	}
	defer tel.Shutdown(context.Background())

	tel.SessionOpened()
	ctx, span := tel.StartRequest(context.Background(), telemetry.Request{
		Method:    "tools/call",
		Tool:      "run_code",
		SessionID: "6f1c",
		RequestID: "1",
		Transport: telemetry.TransportPipe,
		Meta:      map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	})
	// Inside run_code: `await tools.fs_read(path="README.md")`.
	_, nested := tel.StartNested(ctx, "fs.read")
	nested.End(telemetry.Outcome{ErrorType: telemetry.ToolError})
	span.End(telemetry.Outcome{})

	rr := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.SplitSeq(rr.Body.String(), "\n") {
		if strings.HasPrefix(line, "bub_mcp_") {
			fmt.Println(line)
		}
	}
	// Output:
	// bub_mcp_tool_calls_total{gen_ai_tool_name="fs.read",mode="nested",outcome="tool_error"} 1
	// bub_mcp_tool_calls_total{gen_ai_tool_name="run_code",mode="direct",outcome="ok"} 1
	// bub_mcp_tool_calls_active{gen_ai_tool_name="fs.read",mode="nested"} 0
	// bub_mcp_tool_calls_active{gen_ai_tool_name="run_code",mode="direct"} 0
	// bub_mcp_sessions_active 1
}
