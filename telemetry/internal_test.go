package telemetry

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOTLPEndpoint(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{name: "nothing set", want: ""},
		{name: "base endpoint gets the signal path",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"},
			want: "http://localhost:4318/v1/traces"},
		{name: "base endpoint with a path",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example/otlp/"},
			want: "https://collector.example/otlp/v1/traces"},
		{name: "per-signal endpoint is used as is and wins",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://localhost:4318",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://tempo:4318/custom",
			},
			want: "http://tempo:4318/custom"},
		{name: "SDK disabled",
			env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}},
		{name: "traces exporter none",
			env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}},
		{name: "unsupported exporter",
			env:     map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			wantErr: `telemetry: OTEL_TRACES_EXPORTER="zipkin" is not supported (use otlp or none)`},
		{name: "grpc protocol",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4317"},
			wantErr: `telemetry: OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not supported (use http/protobuf or http/json)`},
		{name: "per-signal protocol overrides grpc",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_PROTOCOL":        "grpc",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
				"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://localhost:4318",
			},
			want: "http://localhost:4318/v1/traces"},
		{name: "not a URL",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"},
			wantErr: `telemetry: OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318" is not an http(s) URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := otlpEndpoint(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("otlpEndpoint() error = %v; want %s", err, tt.wantErr)
				}
				if _, nerr := New(&Options{Getenv: func(k string) string { return tt.env[k] }}); nerr == nil {
					t.Errorf("New accepted what otlpEndpoint rejects")
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("otlpEndpoint() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestExposition checks a whole scrape byte for byte, with a fixed clock.
func TestExposition(t *testing.T) {
	tel, err := New(&Options{Getenv: func(string) string { return "" }, Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(0, 0)
	tel.now = func() time.Time { return clock }
	call := func(method, tool string, d time.Duration, o Outcome) {
		_, s := tel.StartRequest(context.Background(), Request{Method: method, Tool: tool})
		clock = clock.Add(d)
		s.End(o)
	}
	call("tools/call", "fs.read", 10*time.Millisecond, Outcome{}) // on a bound: le is inclusive
	call("tools/call", "fs.read", 1500*time.Millisecond, Outcome{})
	call("initialize", "", 400*time.Second, Outcome{}) // past the last bound
	tel.SessionOpened()

	rr := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	var b strings.Builder
	bucketLines := func(labels string, counts ...int) {
		bounds := []string{"0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10", "30", "60", "120", "300", "+Inf"}
		for i, le := range bounds {
			fmt.Fprintf(&b, "mcp_server_operation_duration_seconds_bucket{%s,le=%q} %d\n", labels, le, counts[i])
		}
	}
	b.WriteString("# HELP mcp_server_operation_duration_seconds MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent.\n")
	b.WriteString("# TYPE mcp_server_operation_duration_seconds histogram\n")
	bucketLines(`mcp_method_name="initialize"`, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)
	b.WriteString(`mcp_server_operation_duration_seconds_sum{mcp_method_name="initialize"} 400` + "\n")
	b.WriteString(`mcp_server_operation_duration_seconds_count{mcp_method_name="initialize"} 1` + "\n")
	bucketLines(`mcp_method_name="tools/call",gen_ai_tool_name="fs.read"`, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2)
	b.WriteString(`mcp_server_operation_duration_seconds_sum{mcp_method_name="tools/call",gen_ai_tool_name="fs.read"} 1.51` + "\n")
	b.WriteString(`mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="fs.read"} 2` + "\n")
	b.WriteString("# HELP bub_mcp_tool_calls_total Tool calls by tool, mode (direct: a tools/call request; nested: from inside another tool, such as run_code) and outcome (ok, tool_error or error).\n")
	b.WriteString("# TYPE bub_mcp_tool_calls_total counter\n")
	b.WriteString(`bub_mcp_tool_calls_total{gen_ai_tool_name="fs.read",mode="direct",outcome="ok"} 2` + "\n")
	b.WriteString("# HELP bub_mcp_tool_calls_active Tool calls in flight by tool and mode.\n")
	b.WriteString("# TYPE bub_mcp_tool_calls_active gauge\n")
	b.WriteString(`bub_mcp_tool_calls_active{gen_ai_tool_name="fs.read",mode="direct"} 0` + "\n")
	b.WriteString("# HELP bub_mcp_sessions_active Open MCP sessions.\n")
	b.WriteString("# TYPE bub_mcp_sessions_active gauge\n")
	b.WriteString("bub_mcp_sessions_active 1\n")

	if diff := cmp.Diff(b.String(), rr.Body.String()); diff != "" {
		t.Errorf("exposition (-want +got):\n%s", diff)
	}
}

// TestSeriesBound checks that client-chosen names cannot grow the scrape
// past maxSeries per instrument.
func TestSeriesBound(t *testing.T) {
	tel, err := New(&Options{Getenv: func(string) string { return "" }, Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxSeries + 10 {
		_, s := tel.StartRequest(context.Background(), Request{Method: "tools/call", Tool: fmt.Sprint("t", i)})
		s.End(Outcome{})
	}
	m := tel.metrics
	if len(m.duration) != maxSeries+1 || len(m.calls) != maxSeries+1 || len(m.active) != maxSeries+1 {
		t.Errorf("series = %d, %d, %d; want %d each (the bound plus overflow)", len(m.duration), len(m.calls), len(m.active), maxSeries+1)
	}
	over := labels{overflow: true}
	if got := m.calls[over]; got != 10 {
		t.Errorf("overflow calls = %d; want 10", got)
	}
	if got := m.active[over]; got != 0 {
		t.Errorf("overflow in-flight = %d; want 0 (begin and end agree)", got)
	}
	if text := string(m.render()); !strings.Contains(text, `bub_mcp_tool_calls_total{otel_metric_overflow="true"} 10`+"\n") {
		t.Error("exposition lacks the overflow series")
	}
}

func TestFormatFloat(t *testing.T) {
	for in, want := range map[float64]string{0.01: "0.01", 300: "300", 1.5e-7: "1.5e-07", 1e21: "1e+21"} {
		if got := formatFloat(in); got != want {
			t.Errorf("formatFloat(%v) = %q; want %q", in, got, want)
		}
	}
}
