// Package telemetry gives the MCP server OpenTelemetry traces and a small
// set of metrics, named after the OpenTelemetry semantic conventions for the
// Model Context Protocol (open-telemetry/semantic-conventions-genai,
// docs/gen-ai/mcp.md).
//
// One [Telemetry] belongs to one App: nothing here touches OpenTelemetry's
// global tracer provider or propagator, so two Apps in one process stay
// independent. Each request gets a [Span] from [Telemetry.StartRequest] and
// hands it an [Outcome] when it ends; that one call both ends the trace span
// and records the metrics, so the two cannot disagree.
//
// Tracing is on only when an OTLP endpoint is configured
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); spans
// then go out over OTLP/HTTP. Otherwise, and with metrics off, StartRequest
// returns the caller's ctx and a nil *Span without allocating, because most
// servers never export traces and must not pay for them. A nil *Telemetry
// and a nil *Span are valid and do nothing.
//
// Metrics, when [Options.Metrics] is set, are served by
// [Telemetry.MetricsHandler] in the Prometheus text exposition format.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// instrumentationName names the tracer, as OpenTelemetry asks: the package
// that produces the spans.
const instrumentationName = "github.com/bubbuild/bub-mcp/telemetry"

// Options configure [New]. A nil *Options means the zero Options; New copies
// the struct, so changing it afterwards has no effect.
type Options struct {
	// Getenv reads the OTEL_* variables that decide whether traces are
	// exported, where to and how (OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER,
	// and OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, PROTOCOL, HEADERS,
	// COMPRESSION, TIMEOUT, CERTIFICATE, CLIENT_CERTIFICATE, CLIENT_KEY).
	// nil means os.Getenv. The sampler, batching and OTEL_RESOURCE_ATTRIBUTES
	// are read by the OpenTelemetry SDK from the process environment itself.
	Getenv func(string) string

	// ServiceName is the service.name resource attribute; "" means "bub-mcp".
	// OTEL_SERVICE_NAME overrides it, as the OpenTelemetry spec requires.
	ServiceName string

	// ServiceVersion is the service.version resource attribute; "" omits it.
	ServiceVersion string

	// Metrics turns on the in-process instruments behind MetricsHandler.
	// false means no metric work on any request and a MetricsHandler that
	// answers 404.
	Metrics bool

	// TracerProvider, when non-nil, receives the spans instead of an OTLP
	// exporter, whatever the environment says. It is for tests (a
	// tracetest.SpanRecorder) and for embedding bub-mcp in a program that
	// already has a provider. Shutdown does not shut it down: its owner does.
	TracerProvider trace.TracerProvider
}

// Telemetry is the tracing and metrics state of one App. Its methods are safe
// for concurrent use, and a nil *Telemetry is a valid no-op.
type Telemetry struct {
	tracer     trace.Tracer // a noop tracer when tracing is off
	tracing    bool
	propagator propagation.TextMapPropagator
	owned      *sdktrace.TracerProvider // ours to flush and shut down; nil otherwise
	metrics    *metrics                 // nil when Options.Metrics is false
	now        func() time.Time         // time.Now; tests fix it
}

// New builds the telemetry described by opts and the environment. It starts
// no goroutine and opens no connection unless an OTLP endpoint is set (the
// exporter connects lazily, on its first batch). An error names the variable
// at fault.
func New(opts *Options) (*Telemetry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.ServiceName == "" {
		o.ServiceName = "bub-mcp"
	}

	t := &Telemetry{
		now: time.Now,
		// W3C trace context and baggage: the keys the MCP conventions (SEP-414)
		// put unprefixed in params._meta, and the HTTP headers of the same names.
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	if o.Metrics {
		t.metrics = newMetrics()
	}

	switch {
	case o.TracerProvider != nil:
		t.tracer = o.TracerProvider.Tracer(instrumentationName)
		t.tracing = true
	default:
		endpoint, err := otlpEndpoint(o.Getenv)
		if err != nil {
			return nil, err
		}
		if endpoint == "" {
			t.tracer = noop.NewTracerProvider().Tracer(instrumentationName)
			return t, nil
		}
		tp, err := newExportingProvider(endpoint, &o)
		if err != nil {
			return nil, err
		}
		t.owned = tp
		t.tracer = tp.Tracer(instrumentationName)
		t.tracing = true
	}
	return t, nil
}

// otlpEndpoint returns the full OTLP/HTTP traces URL, or "" when traces are
// not to be exported. The per-signal variable is used as is and the generic
// one gets /v1/traces appended, exactly as the OTLP exporter spec says, so
// the URL we pass the exporter is the one it would have derived itself.
func otlpEndpoint(getenv func(string) string) (string, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return "", nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return "", nil
	default:
		return "", fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q is not supported (use otlp or none)", exp)
	}
	// The per-signal variable wins over the generic one (otlpSetting).
	if p, name := otlpSetting(getenv, "PROTOCOL"); p != "" && p != "http/protobuf" && p != "http/json" {
		return "", fmt.Errorf("telemetry: %s=%q is not supported (use http/protobuf or http/json)", name, p)
	}
	raw, name := otlpSetting(getenv, "ENDPOINT")
	perSignal := name == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("telemetry: %s=%q is not an http(s) URL", name, raw)
	}
	if !perSignal {
		u.Path = path.Join("/", u.Path, "v1/traces")
	}
	return u.String(), nil
}

// newExportingProvider builds the SDK provider that batches spans to endpoint.
func newExportingProvider(endpoint string, o *Options) (*sdktrace.TracerProvider, error) {
	client, err := newOTLPClient(endpoint, o.Getenv)
	if err != nil {
		return nil, err
	}
	exp, err := otlptrace.New(context.Background(), client)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", o.ServiceName)}
	if o.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", o.ServiceVersion))
	}
	// Later detectors win: OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
	// override our defaults, as the OpenTelemetry spec requires.
	res, err := resource.New(context.Background(),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attrs...),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Enabled reports whether t traces or measures anything. When it does not
// (and on a nil *Telemetry), callers need not install hooks at all, which
// is how a server without telemetry pays nothing for it.
func (t *Telemetry) Enabled() bool {
	return t != nil && (t.tracing || t.metrics != nil)
}

// Shutdown flushes the spans still batched and stops the exporter; it
// returns when ctx ends at the latest. It is safe to call more than once and
// on a nil *Telemetry. A TracerProvider passed in Options is left alone.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil || t.owned == nil {
		return nil
	}
	if err := t.owned.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}
