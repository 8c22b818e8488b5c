package telemetry

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// otlpClient is the trace exporter's transport: otlptrace turns the SDK's
// spans into OTLP messages and hands them here, to be POSTed as
// http/protobuf (or http/json).
//
// Workaround: it stands in for otlptracehttp, OpenTelemetry's OTLP/HTTP
// client, which links google.golang.org/grpc though it never speaks gRPC
// (its configuration package and the collector protos import it:
// open-telemetry/opentelemetry-go#2579, #8385). That tree was 11 MB of a
// 54 MB bub-mcp, and through golang.org/x/net/trace it reaches
// text/template's reflective method calls, which make the linker keep
// every exported method of every type. TestNoGRPC fails when it is linked
// again. The client reads the exporter variables otlptracehttp read
// (protocol, headers, compression, timeout, certificates) and retries as
// it did.
type otlpClient struct {
	endpoint string
	json     bool // http/json rather than http/protobuf
	headers  http.Header
	gzip     bool
	timeout  time.Duration // per attempt
	client   *http.Client
	retry    retryPolicy

	stopped context.Context // ends in Stop: uploads still retrying give up
	stop    context.CancelFunc
}

// retryPolicy is exponential backoff with jitter, otlptracehttp's defaults.
type retryPolicy struct{ initial, max, elapsed time.Duration }

var defaultRetry = retryPolicy{initial: 5 * time.Second, max: 30 * time.Second, elapsed: time.Minute}

// maxResponseBytes bounds how much of a collector's answer is read.
const maxResponseBytes = 64 << 10

// otlpSetting returns the traces variable of an exporter setting, else the
// generic one, and the name of the variable it came from.
func otlpSetting(getenv func(string) string, setting string) (value, name string) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + setting, "OTEL_EXPORTER_OTLP_" + setting} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v, name
		}
	}
	return "", ""
}

// newOTLPClient configures a client for endpoint from the OTLP exporter
// variables; an error names the variable at fault.
func newOTLPClient(endpoint string, getenv func(string) string) (*otlpClient, error) {
	c := &otlpClient{endpoint: endpoint, headers: http.Header{}, timeout: 10 * time.Second, retry: defaultRetry}
	if v, _ := otlpSetting(getenv, "PROTOCOL"); v == "http/json" { // otlpEndpoint refused the others
		c.json = true
	}
	if v, name := otlpSetting(getenv, "HEADERS"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			k, kerr := url.PathUnescape(strings.TrimSpace(k))
			val, verr := url.PathUnescape(strings.TrimSpace(val))
			if !ok || k == "" || kerr != nil || verr != nil {
				return nil, fmt.Errorf("telemetry: %s: %q is not key=value (values percent-encoded)", name, strings.TrimSpace(kv))
			}
			c.headers.Add(k, val)
		}
	}
	switch v, name := otlpSetting(getenv, "COMPRESSION"); v {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("telemetry: %s=%q is not supported (use gzip or none)", name, v)
	}
	if v, name := otlpSetting(getenv, "TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("telemetry: %s=%q is not a positive number of milliseconds", name, v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	tlsConfig, err := otlpTLS(getenv)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsConfig != nil {
		tr.TLSClientConfig = tlsConfig
	}
	c.client = &http.Client{Transport: tr}
	c.stopped, c.stop = context.WithCancel(context.Background())
	return c, nil
}

// otlpTLS builds the TLS configuration the certificate variables ask for,
// or nil when none is set.
func otlpTLS(getenv func(string) string) (*tls.Config, error) {
	ca, caName := otlpSetting(getenv, "CERTIFICATE")
	cert, certName := otlpSetting(getenv, "CLIENT_CERTIFICATE")
	key, keyName := otlpSetting(getenv, "CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s: %w", caName, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("telemetry: %s: %s holds no PEM certificate", caName, ca)
		}
	}
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s and %s: %w", certName, keyName, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case cert != "":
		return nil, fmt.Errorf("telemetry: %s is set without OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_KEY", certName)
	case key != "":
		return nil, fmt.Errorf("telemetry: %s is set without OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_CERTIFICATE", keyName)
	}
	return cfg, nil
}

var _ otlptrace.Client = (*otlpClient)(nil)

// Start connects lazily: nothing to do.
func (c *otlpClient) Start(context.Context) error { return nil }

// Stop ends uploads still waiting to retry and closes idle connections.
func (c *otlpClient) Stop(context.Context) error {
	c.stop()
	c.client.CloseIdleConnections()
	return nil
}

// UploadTraces sends one batch, retrying what the OTLP spec says is
// transient (a collector out of reach, 429, 502, 503, 504) with backoff,
// honouring Retry-After, for at most retry.elapsed.
func (c *otlpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	encode := encodeExportRequest
	if c.json {
		encode = encodeExportRequestJSON
	}
	body, err := encode(spans)
	if err != nil {
		return err
	}
	if c.gzip {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, _ = w.Write(body)
		if err := w.Close(); err != nil {
			return fmt.Errorf("telemetry: OTLP export: gzip: %w", err)
		}
		body = z.Bytes()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.stopped, cancel)()
	start, backoff := time.Now(), c.retry.initial
	for {
		throttle, err := c.post(ctx, body)
		if err == nil || throttle < 0 {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
		// The greater of the backoff, jittered by ±50%, and the server's
		// Retry-After.
		delay := max(throttle, backoff/2+rand.N(backoff))
		if time.Since(start)+delay > c.retry.elapsed {
			return fmt.Errorf("telemetry: OTLP export: giving up after %v: %w", time.Since(start).Round(time.Millisecond), err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		case <-t.C:
		}
		backoff = min(2*backoff, c.retry.max)
	}
}

// post makes one attempt. throttle is negative when err is not worth a
// retry, else the delay the server asked for (zero when it did not).
func (c *otlpClient) post(ctx context.Context, body []byte) (throttle time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("telemetry: OTLP export: %w", err)
	}
	req.Header = c.headers.Clone()
	req.Header.Set("Content-Type", c.contentType())
	req.Header.Set("User-Agent", "bub-mcp OTLP exporter")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// A collector that cannot be reached may come back; one whose
		// certificate is not trusted will not.
		var untrusted *tls.CertificateVerificationError
		if errors.As(err, &untrusted) {
			return -1, fmt.Errorf("telemetry: OTLP export: %w", err)
		}
		return 0, fmt.Errorf("telemetry: OTLP export: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return 0, fmt.Errorf("telemetry: OTLP export to %s: reading the answer: %w", c.endpoint, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		decode := partialSuccess
		switch resp.Header.Get("Content-Type") {
		case "application/x-protobuf":
		case "application/json":
			decode = partialSuccessJSON
		default:
			return 0, nil
		}
		if len(answer) == 0 {
			return 0, nil
		}
		rejected, msg, err := decode(answer)
		switch {
		case err != nil:
			return -1, fmt.Errorf("telemetry: OTLP export to %s: undecodable answer: %w", c.endpoint, err)
		case rejected != 0 || msg != "":
			return -1, fmt.Errorf("telemetry: OTLP partial success: %s (%d spans rejected)", msg, rejected)
		}
		return 0, nil
	}
	text := strings.TrimSpace(string(answer))
	if text == "" || resp.Header.Get("Content-Type") == "application/x-protobuf" {
		text = "(no text)"
	}
	err = fmt.Errorf("telemetry: OTLP export to %s: %s (body: %s)", c.endpoint, resp.Status, text)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After")), err
	}
	return -1, err
}

func (c *otlpClient) contentType() string {
	if c.json {
		return "application/json"
	}
	return "application/x-protobuf"
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 32); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// encodeExportRequest encodes an ExportTraceServiceRequest, whose one
// field is `repeated ResourceSpans resource_spans = 1`: each message,
// tagged. (The collector package that defines the request imports gRPC.)
func encodeExportRequest(spans []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	for _, rs := range spans {
		m, err := proto.Marshal(rs)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP export: encoding spans: %w", err)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b, nil
}

// encodeExportRequestJSON encodes an ExportTraceServiceRequest as OTLP/JSON:
// the protobuf JSON mapping with enums as numbers, and trace and span ids
// in hex rather than base64, as the OTLP spec requires.
func encodeExportRequestJSON(spans []*tracepb.ResourceSpans) ([]byte, error) {
	opts := protojson.MarshalOptions{UseEnumNumbers: true}
	all := make([]any, len(spans))
	for i, rs := range spans {
		b, err := opts.Marshal(rs)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP export: encoding spans: %w", err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber() // 64-bit integers come as strings; the rest stay exact too
		if err := d.Decode(&all[i]); err != nil {
			return nil, fmt.Errorf("telemetry: OTLP export: encoding spans: %w", err)
		}
		hexIDs(all[i])
	}
	return json.Marshal(map[string]any{"resourceSpans": all})
}

// hexIDs rewrites, throughout v, the base64 trace and span ids protojson
// writes into the hex OTLP/JSON wants.
func hexIDs(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
				if b, err := base64.StdEncoding.DecodeString(s); err == nil {
					v[k] = hex.EncodeToString(b)
				}
				continue
			}
			hexIDs(x)
		}
	case []any:
		for _, x := range v {
			hexIDs(x)
		}
	}
}

// partialSuccessJSON decodes an ExportTraceServiceResponse in OTLP/JSON,
// where the int64 rejectedSpans may be a string or a number.
func partialSuccessJSON(b []byte) (rejected int64, msg string, err error) {
	var r struct {
		PartialSuccess struct {
			RejectedSpans json.RawMessage `json:"rejectedSpans"`
			ErrorMessage  string          `json:"errorMessage"`
		} `json:"partialSuccess"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, "", err
	}
	if n := bytes.Trim(r.PartialSuccess.RejectedSpans, `"`); len(n) > 0 {
		if rejected, err = strconv.ParseInt(string(n), 10, 64); err != nil {
			return 0, "", fmt.Errorf("rejectedSpans: %w", err)
		}
	}
	return rejected, r.PartialSuccess.ErrorMessage, nil
}

// partialSuccess decodes an ExportTraceServiceResponse:
// `ExportTracePartialSuccess partial_success = 1`, which holds
// `int64 rejected_spans = 1` and `string error_message = 2`.
func partialSuccess(b []byte) (rejected int64, msg string, err error) {
	var inner error
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) {
		if num != 1 || typ != protowire.BytesType {
			return
		}
		inner = eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) {
			switch {
			case num == 1 && typ == protowire.VarintType:
				rejected = int64(x)
			case num == 2 && typ == protowire.BytesType:
				msg = string(v)
			}
		})
	})
	return rejected, msg, cmp.Or(err, inner)
}

// eachField calls f with each field of the protobuf message b: its bytes
// when length-delimited, its value when a varint.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var (
			v []byte
			x uint64
		)
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f(num, typ, v, x)
	}
	return nil
}
