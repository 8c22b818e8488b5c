package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestNoGRPC: the binary links no gRPC (see otlpClient). It fails when a
// dependency brings google.golang.org/grpc or golang.org/x/net/trace back.
func TestNoGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/bubbuild/bub-mcp/cmd/bub-mcp").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "google.golang.org/grpc") || pkg == "golang.org/x/net/trace" {
			t.Errorf("cmd/bub-mcp links %s", pkg)
		}
	}
}

func TestOTLPClientSettings(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		headers http.Header
		gzip    bool
		timeout time.Duration
		wantErr string
	}{
		{name: "defaults", headers: http.Header{}, timeout: 10 * time.Second},
		{name: "headers, percent-decoded, per-signal wins",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_HEADERS":        "x-ignored=1",
				"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "Authorization=Bearer%20abc, x-tenant = a%2Cb ,x-empty=",
			},
			headers: http.Header{"Authorization": {"Bearer abc"}, "X-Tenant": {"a,b"}, "X-Empty": {""}},
			timeout: 10 * time.Second},
		{name: "gzip and timeout",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2500"},
			headers: http.Header{}, gzip: true, timeout: 2500 * time.Millisecond},
		{name: "header without =",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1,broken"},
			wantErr: `telemetry: OTEL_EXPORTER_OTLP_HEADERS: "broken" is not key=value (values percent-encoded)`},
		{name: "header with a bad escape",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=%zz"},
			wantErr: `telemetry: OTEL_EXPORTER_OTLP_TRACES_HEADERS: "a=%zz" is not key=value (values percent-encoded)`},
		{name: "unknown compression",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
			wantErr: `telemetry: OTEL_EXPORTER_OTLP_COMPRESSION="zstd" is not supported (use gzip or none)`},
		{name: "timeout not a number",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
			wantErr: `telemetry: OTEL_EXPORTER_OTLP_TIMEOUT="10s" is not a positive number of milliseconds`},
		{name: "missing CA file",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"},
			wantErr: `telemetry: OTEL_EXPORTER_OTLP_CERTIFICATE: open /nonexistent/ca.pem: no such file or directory`},
		{name: "client certificate without key",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/c.pem"},
			wantErr: `telemetry: OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set without OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_KEY`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := newOTLPClient("http://127.0.0.1:1/v1/traces", func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v; want %s", err, tt.wantErr)
				}
				env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
				for k, v := range tt.env {
					env[k] = v
				}
				if _, err := New(&Options{Getenv: func(k string) string { return env[k] }}); err == nil {
					t.Error("New accepted what newOTLPClient refuses")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.headers, c.headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if c.gzip != tt.gzip || c.timeout != tt.timeout {
				t.Errorf("gzip, timeout = %v, %v; want %v, %v", c.gzip, c.timeout, tt.gzip, tt.timeout)
			}
		})
	}
}

// collector is a loopback OTLP/HTTP receiver that answers with the
// responses it is given, in turn (the last one repeats), and keeps what
// it received.
type collector struct {
	t         *testing.T
	mu        sync.Mutex
	responses []response
	got       []received
}

type response struct {
	status int
	header http.Header
	body   []byte
}

type received struct {
	header http.Header
	spans  []*tracepb.ResourceSpans
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			c.t.Errorf("gzip: %v", err)
			return
		}
		body, _ = io.ReadAll(zr)
	}
	decode := decodeExportRequest
	if r.Header.Get("Content-Type") == "application/json" {
		decode = decodeExportRequestJSON
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, received{header: r.Header.Clone(), spans: decode(c.t, body)})
	resp := c.responses[min(len(c.got), len(c.responses))-1]
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body)
}

// decodeExportRequest is encodeExportRequest's inverse, written apart
// from it: each field 1 is one ResourceSpans.
func decodeExportRequest(t *testing.T, b []byte) []*tracepb.ResourceSpans {
	var out []*tracepb.ResourceSpans
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			t.Errorf("request: unexpected field %d type %d", num, typ)
			return out
		}
		m, k := protowire.ConsumeBytes(b[n:])
		if k < 0 {
			t.Errorf("request: %v", protowire.ParseError(k))
			return out
		}
		rs := &tracepb.ResourceSpans{}
		if err := proto.Unmarshal(m, rs); err != nil {
			t.Errorf("request: %v", err)
		}
		out = append(out, rs)
		b = b[n+k:]
	}
	return out
}

// decodeExportRequestJSON reads OTLP/JSON: ids must be hex (protojson
// wants base64) and span kinds numbers.
func decodeExportRequestJSON(t *testing.T, b []byte) []*tracepb.ResourceSpans {
	var req struct {
		ResourceSpans []map[string]any `json:"resourceSpans"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		t.Errorf("request: %v", err)
		return nil
	}
	var fix func(v any)
	fix = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch s, _ := x.(string); {
				case k == "traceId" || k == "spanId" || k == "parentSpanId":
					id, err := hex.DecodeString(s)
					if err != nil {
						t.Errorf("request: %s %q is not hex", k, s)
					}
					v[k] = base64.StdEncoding.EncodeToString(id)
				case k == "kind":
					if _, ok := x.(float64); !ok {
						t.Errorf("request: kind %v is not a number", x)
					}
				default:
					fix(x)
				}
			}
		case []any:
			for _, x := range v {
				fix(x)
			}
		}
	}
	var out []*tracepb.ResourceSpans
	for _, m := range req.ResourceSpans {
		fix(m)
		b, _ := json.Marshal(m)
		rs := &tracepb.ResourceSpans{}
		if err := protojson.Unmarshal(b, rs); err != nil {
			t.Errorf("request: %v", err)
		}
		out = append(out, rs)
	}
	return out
}

func testSpans() []*tracepb.ResourceSpans {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	return []*tracepb.ResourceSpans{
		{Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "bub-mcp-test")}},
			ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
				{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), ParentSpanId: bytes.Repeat([]byte{3}, 8),
					Name: "tools/call fs_read", Kind: tracepb.Span_SPAN_KIND_SERVER, StartTimeUnixNano: 1764633600123456789,
					Attributes: []*commonpb.KeyValue{str("gen_ai.tool.name", "fs_read")},
					Links:      []*tracepb.Span_Link{{TraceId: bytes.Repeat([]byte{4}, 16), SpanId: bytes.Repeat([]byte{5}, 8)}}},
			}}}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "initialize"}}}}},
	}
}

// partialSuccessAnswer encodes an ExportTraceServiceResponse.
func partialSuccessAnswer(rejected uint64, msg string) []byte {
	var inner []byte
	inner = protowire.AppendTag(inner, 1, protowire.VarintType)
	inner = protowire.AppendVarint(inner, rejected)
	inner = protowire.AppendTag(inner, 2, protowire.BytesType)
	inner = protowire.AppendString(inner, msg)
	out := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(out, inner)
}

func TestOTLPUpload(t *testing.T) {
	proto200 := response{status: 200, header: http.Header{"Content-Type": {"application/x-protobuf"}}}
	tests := []struct {
		name      string
		env       map[string]string
		responses []response
		attempts  int
		wantErr   string // a substring; "" means success
	}{
		{name: "ok", responses: []response{proto200}, attempts: 1},
		{name: "headers and gzip",
			env:       map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=t1", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"},
			responses: []response{proto200}, attempts: 1},
		{name: "transient failures are retried",
			responses: []response{
				{status: 503, header: http.Header{"Retry-After": {"0"}}},
				{status: 429},
				proto200,
			}, attempts: 3},
		{name: "http/json",
			env:       map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			responses: []response{{status: 200, header: http.Header{"Content-Type": {"application/json"}}, body: []byte("{}")}}, attempts: 1},
		{name: "http/json partial success",
			env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			responses: []response{{status: 200, header: http.Header{"Content-Type": {"application/json"}},
				body: []byte(`{"partialSuccess":{"rejectedSpans":"3","errorMessage":"late"}}`)}},
			attempts: 1, wantErr: "telemetry: OTLP partial success: late (3 spans rejected)"},
		{name: "a bad request is not retried",
			responses: []response{{status: 400, header: http.Header{"Content-Type": {"text/plain"}}, body: []byte("bad spans\n")}},
			attempts:  1, wantErr: "400 Bad Request (body: bad spans)"},
		{name: "partial success is reported",
			responses: []response{{status: 200, header: http.Header{"Content-Type": {"application/x-protobuf"}}, body: partialSuccessAnswer(2, "too old")}},
			attempts:  1, wantErr: "telemetry: OTLP partial success: too old (2 spans rejected)"},
		{name: "an answer that is no protobuf",
			responses: []response{{status: 200, header: http.Header{"Content-Type": {"application/x-protobuf"}}, body: []byte{0x0a, 0x7f}}},
			attempts:  1, wantErr: "undecodable answer"},
		{name: "retries end",
			responses: []response{{status: 502}},
			wantErr:   "giving up after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			col := &collector{t: t, responses: tt.responses}
			srv := httptest.NewServer(col)
			defer srv.Close()
			c, err := newOTLPClient(srv.URL+"/v1/traces", func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			c.retry = retryPolicy{initial: time.Millisecond, max: 4 * time.Millisecond, elapsed: 100 * time.Millisecond}
			defer c.Stop(context.Background())
			sent := testSpans()
			err = c.UploadTraces(t.Context(), sent)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("UploadTraces = %v; want %q", err, tt.wantErr)
			}
			col.mu.Lock()
			defer col.mu.Unlock()
			if tt.attempts > 0 && len(col.got) != tt.attempts {
				t.Errorf("%d attempts; want %d", len(col.got), tt.attempts)
			}
			if tt.attempts == 0 && len(col.got) < 2 {
				t.Errorf("%d attempts; want retries", len(col.got))
			}
			for _, r := range col.got {
				if diff := cmp.Diff(sent, r.spans, protocmp.Transform()); diff != "" {
					t.Errorf("received spans (-sent +got):\n%s", diff)
				}
				wantType := "application/x-protobuf"
				if strings.Contains(tt.env["OTEL_EXPORTER_OTLP_PROTOCOL"]+tt.env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"], "json") {
					wantType = "application/json"
				}
				if ct := r.header.Get("Content-Type"); ct != wantType {
					t.Errorf("Content-Type %q; want %q", ct, wantType)
				}
				if v, ok := tt.env["OTEL_EXPORTER_OTLP_HEADERS"]; ok && r.header.Get("X-Tenant") != strings.TrimPrefix(v, "x-tenant=") {
					t.Errorf("X-Tenant = %q; want it from %q", r.header.Get("X-Tenant"), v)
				}
			}
		})
	}
}

// TestOTLPUploadStops: Stop ends an upload waiting to retry.
func TestOTLPUploadStops(t *testing.T) {
	col := &collector{t: t, responses: []response{{status: 503, header: http.Header{"Retry-After": {"30"}}}}}
	srv := httptest.NewServer(col)
	defer srv.Close()
	c, err := newOTLPClient(srv.URL, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- c.UploadTraces(context.Background(), testSpans()) }()
	for {
		col.mu.Lock()
		n := len(col.got)
		col.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_ = c.Stop(context.Background())
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("UploadTraces = %v; want it cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("UploadTraces still waiting after Stop")
	}
}

// TestOTLPUploadTLS: OTEL_EXPORTER_OTLP_CERTIFICATE names the CA that
// makes the collector's certificate trusted; without it the export fails
// at once.
func TestOTLPUploadTLS(t *testing.T) {
	col := &collector{t: t, responses: []response{{status: 200}}}
	srv := httptest.NewTLSServer(col)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, trusted := range []bool{true, false} {
		env := map[string]string{}
		if trusted {
			env["OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"] = ca
		}
		c, err := newOTLPClient(srv.URL+"/v1/traces", func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		err = c.UploadTraces(t.Context(), testSpans()) // an untrusted certificate is not retried for a minute
		if trusted && err != nil {
			t.Errorf("with the CA: %v", err)
		}
		if !trusted && (err == nil || !strings.Contains(err.Error(), "certificate")) {
			t.Errorf("without the CA: %v; want a certificate error", err)
		}
		_ = c.Stop(context.Background())
	}
}
