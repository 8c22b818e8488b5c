package telemetry

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The metrics are four instruments written out by hand in the Prometheus
// text format (version 0.0.4) rather than through the OpenTelemetry metric
// SDK and its Prometheus exporter. Measured with go1.26 on a small main that
// imports this package (and html/template, as bub-mcp does): the SDK route
// (go.opentelemetry.io/otel/sdk/metric v1.47.0, exporters/prometheus v0.69.0,
// prometheus/client_golang v1.24.1) adds 2.78 MB to the binary (1.90 MB
// stripped); this file adds about 10 kB. The names are the ones the
// OpenTelemetry Prometheus exporter derives from the OTel instruments (dots
// to underscores, the unit "s" as _seconds, _total on counters), so a later
// switch to the SDK keeps dashboards working.

// durationBounds are the bucket boundaries the MCP conventions prescribe for
// mcp.server.operation.duration, in seconds.
var durationBounds = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// maxSeries bounds each instrument's label sets. Tool and method names come
// from clients, so without a bound a client could grow the scrape without
// limit; past it, observations fold into one otel_metric_overflow="true"
// series, as the OpenTelemetry SDK does at its default limit of 2000.
const maxSeries = 2000

// Label values of the tool-call metrics.
const (
	modeDirect = "direct"
	modeNested = "nested"

	outcomeOK    = "ok"
	outcomeError = "error"
)

// labels is one series' label values, in the order of its instrument's
// label names. An empty value omits the label, as an absent OTel attribute
// does. overflow marks the series that takes observations past maxSeries.
type labels struct {
	v        [3]string
	overflow bool
}

// histogram holds one series of mcp.server.operation.duration.
type histogram struct {
	counts []uint64 // per bucket, not cumulative; the last is (300, +Inf]
	sum    float64
}

// metrics holds every instrument. One mutex guards them all: an update is a
// map look-up and a few additions, far below the cost of any MCP request,
// and a single lock lets a scrape read a consistent snapshot.
type metrics struct {
	mu       sync.Mutex
	duration map[labels]*histogram // mcp_method_name, gen_ai_tool_name, error_type
	calls    map[labels]uint64     // gen_ai_tool_name, mode, outcome
	active   map[labels]int64      // gen_ai_tool_name, mode
	sessions atomic.Int64
}

func newMetrics() *metrics {
	return &metrics{
		duration: make(map[labels]*histogram),
		calls:    make(map[labels]uint64),
		active:   make(map[labels]int64),
	}
}

// bounded returns k, or the overflow key when k is new and m already holds
// maxSeries series.
func bounded[V any](m map[labels]V, k labels) labels {
	if _, ok := m[k]; ok || len(m) < maxSeries {
		return k
	}
	return labels{overflow: true}
}

func mode(s *Span) string {
	if s.nested {
		return modeNested
	}
	return modeDirect
}

// begin counts a tool call in flight.
func (m *metrics) begin(s *Span) {
	if s.tool == "" {
		return
	}
	k := labels{v: [3]string{s.tool, mode(s)}}
	m.mu.Lock()
	m.active[bounded(m.active, k)]++
	m.mu.Unlock()
}

// end records an operation that took secs seconds and ended with errType.
func (m *metrics) end(s *Span, errType string, secs float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !s.nested {
		k := bounded(m.duration, labels{v: [3]string{s.method, s.tool, errType}})
		h := m.duration[k]
		if h == nil {
			h = &histogram{counts: make([]uint64, len(durationBounds)+1)}
			m.duration[k] = h
		}
		// The first bound >= secs: Prometheus buckets are le, upper-inclusive.
		i, _ := slices.BinarySearch(durationBounds, secs)
		h.counts[i]++
		h.sum += secs
	}
	if s.tool == "" {
		return
	}
	outcome := outcomeOK
	switch {
	case errType == ToolError:
		outcome = ToolError
	case errType != "":
		outcome = outcomeError
	}
	md := mode(s)
	m.calls[bounded(m.calls, labels{v: [3]string{s.tool, md, outcome}})]++
	// The same key begin used: series are never deleted, so a key that was
	// present (or absent, the map being full) then still is.
	m.active[bounded(m.active, labels{v: [3]string{s.tool, md}})]--
}

// Metric families, as exposed.
const (
	nameDuration = "mcp_server_operation_duration_seconds"
	nameCalls    = "bub_mcp_tool_calls_total"
	nameActive   = "bub_mcp_tool_calls_active"
	nameSessions = "bub_mcp_sessions_active"
)

var (
	durationLabels = []string{"mcp_method_name", "gen_ai_tool_name", "error_type"}
	callsLabels    = []string{"gen_ai_tool_name", "mode", "outcome"}
	activeLabels   = []string{"gen_ai_tool_name", "mode"}
)

// MetricsHandler serves the metrics in the Prometheus text exposition
// format, for mounting at /metrics. With metrics off (or on a nil
// *Telemetry) it answers 404, so a mounted route says why it is empty.
func (t *Telemetry) MetricsHandler() http.Handler {
	if t == nil || t.metrics == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "telemetry: metrics are disabled", http.StatusNotFound)
		})
	}
	return t.metrics
}

// ServeHTTP writes every instrument in the Prometheus text format. The
// exposition is rendered under the lock into a buffer and written after it,
// so a slow scraper never holds up requests.
func (m *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "telemetry: method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body := m.render()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodGet {
		w.Write(body) //nolint:errcheck // the scraper left; nothing to do
	}
}

func (m *metrics) render() []byte {
	var b bytes.Buffer
	m.mu.Lock()
	defer m.mu.Unlock()

	header(&b, nameDuration, "histogram", "MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent.")
	for _, k := range sortedKeys(m.duration, durationLabels) {
		h := m.duration[k.labels]
		var cum uint64
		for i, c := range h.counts {
			cum += c
			le := "+Inf"
			if i < len(durationBounds) {
				le = formatFloat(durationBounds[i])
			}
			sample(&b, nameDuration+"_bucket", k.text, `le="`+le+`"`, strconv.FormatUint(cum, 10))
		}
		// _count is the +Inf bucket by construction, as the format requires.
		sample(&b, nameDuration+"_sum", k.text, "", formatFloat(h.sum))
		sample(&b, nameDuration+"_count", k.text, "", strconv.FormatUint(cum, 10))
	}

	header(&b, nameCalls, "counter", "Tool calls by tool, mode (direct: a tools/call request; nested: from inside another tool, such as run_code) and outcome (ok, tool_error or error).")
	for _, k := range sortedKeys(m.calls, callsLabels) {
		sample(&b, nameCalls, k.text, "", strconv.FormatUint(m.calls[k.labels], 10))
	}

	header(&b, nameActive, "gauge", "Tool calls in flight by tool and mode.")
	for _, k := range sortedKeys(m.active, activeLabels) {
		sample(&b, nameActive, k.text, "", strconv.FormatInt(m.active[k.labels], 10))
	}

	header(&b, nameSessions, "gauge", "Open MCP sessions.")
	sample(&b, nameSessions, "", "", strconv.FormatInt(m.sessions.Load(), 10))
	return b.Bytes()
}

// series is a key with its rendered label pairs (without braces).
type series struct {
	labels labels
	text   string
}

// sortedKeys renders each key's labels and sorts by them, so a scrape is
// deterministic (and testable).
func sortedKeys[V any](m map[labels]V, names []string) []series {
	out := make([]series, 0, len(m))
	for k := range m {
		out = append(out, series{k, labelText(k, names)})
	}
	slices.SortFunc(out, func(a, b series) int { return strings.Compare(a.text, b.text) })
	return out
}

func labelText(k labels, names []string) string {
	if k.overflow {
		return `otel_metric_overflow="true"`
	}
	var b strings.Builder
	for i, name := range names {
		if k.v[i] == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(k.v[i]))
		b.WriteByte('"')
	}
	return b.String()
}

func header(b *bytes.Buffer, name, typ, help string) {
	b.WriteString("# HELP " + name + " " + escapeHelp(help) + "\n")
	b.WriteString("# TYPE " + name + " " + typ + "\n")
}

// sample writes `name{labels,extra} value`; either label part may be empty.
func sample(b *bytes.Buffer, name, labels, extra, value string) {
	b.WriteString(name)
	if labels != "" || extra != "" {
		b.WriteByte('{')
		b.WriteString(labels)
		if labels != "" && extra != "" {
			b.WriteByte(',')
		}
		b.WriteString(extra)
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(value)
	b.WriteByte('\n')
}

// The text format escapes backslash, double quote and newline in label
// values, and backslash and newline in HELP text.
var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

// formatFloat writes a float as the Prometheus parsers read it: Go's
// shortest representation, with +Inf, -Inf and NaN spelt their way.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
