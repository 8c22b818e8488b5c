package mcpserver_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkTelemetryEcho is bub-mcp's side of BenchmarkStdioEcho (w=1) and
// BenchmarkHTTPEcho (c=1) by telemetry: nil (none), disabled (what serve
// runs without OTEL_* and metrics: no hooks installed), metrics on, and
// traced into an SDK provider without a processor (the span work, no
// export). nil and disabled should not differ measurably.
func BenchmarkTelemetryEcho(b *testing.B) {
	for _, mode := range []string{"nil", "disabled", "metrics", "traced"} {
		b.Run("stdio/"+mode, func(b *testing.B) {
			benchStdio(b, func(b *testing.B, ctx context.Context, in io.Reader, out io.Writer) {
				go stdio.Serve(ctx, telServer(b, mode), in, out, providers.Connection{Profile: "default"}, time.Second)
			}, 1)
		})
		b.Run("http/"+mode, func(b *testing.B) {
			h, closeSessions := httpHandler(telServer(b, mode), streamhttp.Options{Profiles: []string{"default"}, CheckHosts: true})
			b.Cleanup(func() { closeSessions(context.Background()) })
			benchHTTP(b, h, 1)
		})
	}
}

// telServer is bubServer with the telemetry mode names, shared by the App
// (nested calls) and the server, as serve does.
func telServer(b *testing.B, mode string) *mcpserver.Server {
	b.Helper()
	var tel *telemetry.Telemetry
	if mode != "nil" {
		o := &telemetry.Options{Getenv: func(string) string { return "" }, Metrics: mode == "metrics"}
		if mode == "traced" {
			tp := sdktrace.NewTracerProvider()
			b.Cleanup(func() { tp.Shutdown(context.Background()) })
			o.TracerProvider = tp
		}
		var err error
		if tel, err = telemetry.New(o); err != nil {
			b.Fatal(err)
		}
	}
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("echo", "Echo a message back.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		Message string `json:"message" jsonschema:"description=Text to echo back"`
	}) (string, error) {
		return "Echo: " + in.Message, nil
	}))
	cfg, err := config.Parse("bench.toml", "", func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	h, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: reg, Modules: []string{}, Home: b.TempDir(), Workspace: b.TempDir(),
		Logger: slog.New(slog.DiscardHandler), Telemetry: tel})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	srv, err := mcpserver.New(&mcpserver.Options{Backend: h, Registry: h.Registry(), Logger: slog.New(slog.DiscardHandler), Telemetry: tel})
	if err != nil {
		b.Fatal(err)
	}
	return srv
}
